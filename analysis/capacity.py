"""What the flows could use, as a function of time: T_max and the fair shares follow the links' schedule.

A link event that changes a constrained link (a `rate` event halving the bottleneck, a `down` taking it out)
changes what the flows could carry, so T_max, and with it EEE, UAR, the fair shares and the fidelity monitor's
reference, must change with it for the intervals it covers. Capacity keeps each constrained link's payload
capacity piecewise constant between the schedule's changes and gives, for an interval [a, b], the time average
of the network's capacity and of each flow's fair share over the pieces that fall in it.

    cap = Capacity({("r1", "r2"): 9.5e6}, changes=[(5.0, ("r1", "r2"), 4.75e6), (9.0, ("r1", "r2"), None)])
    cap.t_max(4, 6)                 # 7.125e6: half the interval at each rate
    cap.shares(spans, 4, 6)         # each active flow's share, time-averaged the same way

A change to None restores the link's own capacity. A link that is not constrained at all (no rate of its own)
has no capacity until an event gives it one (a `down` makes it 0: the flows crossing it could carry nothing).
The same pieces can carry a trace-driven link later: a trace is a long list of changes.
"""
from __future__ import annotations

from typing import Sequence

from ccrig.analysis.intervals import fair_shares, max_min, network_capacity

Link = tuple[str, str]


class Capacity:
    def __init__(self, base: dict[Link, float], changes: Sequence[tuple[float, Link, float | None]] = (),
                 paths: Sequence[Sequence[Link]] | None = None):
        """base: each constrained link's own payload capacity (bit/s); changes: (time, link, capacity or None to
        restore the link's own) in any order; paths: the links each flow crosses, in flow order (None: one
        bottleneck shared by every flow)."""
        self.base = dict(base)
        self.changes = sorted(changes, key=lambda c: c[0])
        self.paths = None if paths is None else [list(p) for p in paths]

    @property
    def varies(self) -> bool:
        return bool(self.changes)

    def at(self, t: float) -> dict[Link, float]:
        """Each link's capacity at time t (the changes at t included)."""
        now = dict(self.base)
        for when, link, cap in self.changes:
            if when > t:
                break
            if cap is None:
                now.pop(link, None)
                if link in self.base:
                    now[link] = self.base[link]
            else:
                now[link] = cap
        return now

    def pieces(self, a: float, b: float) -> list[tuple[float, dict[Link, float]]]:
        """(duration, capacities) of each constant piece of [a, b]."""
        cuts = [a] + [t for t, _, _ in self.changes if a < t < b] + [b]
        return [(t1 - t0, self.at(t0)) for t0, t1 in zip(cuts, cuts[1:]) if t1 > t0]

    def _paths(self, caps: dict[Link, float]) -> list[list[Link]] | None:
        if self.paths is None:
            return None
        return [[q for q in p if q in caps] for p in self.paths]

    def network(self, caps: dict[Link, float]) -> float:
        """The most the flows together could carry with these capacities."""
        paths = self._paths(caps)
        if paths is None:   # one bottleneck, every flow through it
            return min(caps.values(), default=0.0)
        return network_capacity(paths, caps)

    def link(self, link: Link, a: float, b: float) -> float | None:
        """One link's capacity over [a, b], time-averaged (None: the link has no capacity of its own)."""
        own = self.base.get(link)
        if own is None:
            return None
        pieces = self.pieces(a, b)
        return sum(d * c.get(link, own) for d, c in pieces) / sum(d for d, _ in pieces)

    def t_max(self, a: float, b: float) -> float:
        """The system's T_max over [a, b]: the time average of the network's capacity."""
        pieces = self.pieces(a, b)
        return sum(d * self.network(c) for d, c in pieces) / sum(d for d, _ in pieces)

    def shares(self, spans: Sequence[tuple[float, float]], a: float, b: float) -> list[float | None]:
        """Each flow's fair share over [a, b], time-averaged over the pieces (None: the flow is not active)."""
        pieces = self.pieces(a, b)
        total = sum(d for d, _ in pieces)
        out: list[float | None] = [None] * len(spans)
        for d, caps in pieces:
            paths = self._paths(caps)
            if paths is None:
                part = fair_shares(self.network(caps), spans, a, b)
            else:
                on = [x is not None for x in fair_shares(0.0, spans, a, b)]
                part = max_min([p if x else [] for p, x in zip(paths, on)], caps, on)
            for i, s in enumerate(part):
                if s is not None:
                    out[i] = (out[i] or 0.0) + s * d / total
        return out
