"""From the kernel's counters to per-interval metrics.

The sampler reports cumulative TCP_INFO counters every few tens of milliseconds. A counter's value at an
interval boundary is interpolated linearly between the samples around it (0 before a flow's first sample,
held after its last), so an interval's rates do not depend on when the sampler happened to poll. Gauges
(srtt, cwnd) are averaged over the samples inside the interval.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from . import metrics

COUNTERS = ("bytes_acked", "bytes_sent", "total_retrans", "data_segs_out", "dsack_dups", "bytes_received",
            "data_segs_in")
UNSET_U32 = 0xFFFFFFFF  # tcpi_min_rtt before the first RTT sample (the kernel's minmax starts at ~0U)


def counter_at(times: Sequence[float], values: Sequence[float], t: float) -> float:
    """A cumulative counter's value at time t, interpolated between samples (times sorted)."""
    if not times or t < times[0]:
        return 0.0
    i = bisect_right(times, t)
    if i >= len(times):
        return float(values[-1])
    t0, t1 = times[i - 1], times[i]
    v0, v1 = values[i - 1], values[i]
    return float(v0 + (v1 - v0) * (t - t0) / (t1 - t0)) if t1 > t0 else float(v1)


class FlowSeries:
    """One flow's samples from one end, as parallel lists per field, times in seconds since the point began."""

    def __init__(self, samples: Sequence[tuple[float, dict]]):
        self.t = [t for t, _ in samples]
        self.fields = {}
        for _, s in samples:
            for k, v in s.items():
                if isinstance(v, (int, float)):
                    self.fields.setdefault(k, [])
        for k in self.fields:
            self.fields[k] = [s.get(k, 0) for _, s in samples]

    def at(self, name: str, t: float) -> float:
        return counter_at(self.t, self.fields.get(name, []), t) if name in self.fields else 0.0

    def delta(self, name: str, a: float, b: float) -> float:
        return self.at(name, b) - self.at(name, a)

    def mean(self, name: str, a: float, b: float) -> float | None:
        lo, hi = bisect_right(self.t, a), bisect_right(self.t, b)
        vals = self.fields.get(name, [])[lo:hi]
        return sum(vals) / len(vals) if vals else None

    def minimum(self, name: str, a: float, b: float) -> float | None:
        """The smallest valid value of a gauge inside [a, b] (0 and ~0U mean "no measurement yet")."""
        lo, hi = bisect_right(self.t, a), bisect_right(self.t, b)
        vals = [v for v in self.fields.get(name, [])[lo:hi] if 0 < v < UNSET_U32]
        return min(vals) if vals else None


def flow_interval(snd: FlowSeries, a: float, b: float, t_max: float) -> dict:
    """The metrics of one flow over [a, b], from its sender's counters; t_max is its fair share."""
    dt = b - a
    g = metrics.rate(snd.delta("bytes_acked", a, b), dt)
    t = metrics.rate(snd.delta("bytes_sent", a, b), dt)
    sent = snd.delta("data_segs_out", a, b)
    retrans = snd.delta("total_retrans", a, b)
    spurious = snd.delta("dsack_dups", a, b)
    rtt_us = snd.mean("rtt_us", a, b)
    min_rtt_us = snd.minimum("min_rtt_us", a, b)
    return {
        "goodput_bps": g, "throughput_bps": t,
        "eee": metrics.eee(t, g, t_max), "uar": metrics.uar(t, g, t_max),
        # a flow's loss, seen from its sender: retransmissions the receiver did not report as duplicates
        "loss": metrics.ratio(max(0.0, retrans - spurious), sent),
        "retrans_rate": metrics.ratio(retrans, sent),
        "rtt_s": None if rtt_us is None else rtt_us / 1e6,
        # the path's base RTT as TCP sees it (no queueing): what a configured delay is checked against
        "min_rtt_s": None if min_rtt_us is None else min_rtt_us / 1e6,
        "cwnd": snd.mean("snd_cwnd", a, b),
        # raw counts, for the system's totals and a flow's loss over a whole repetition (sums, not a mean of
        # per-interval ratios: an interval spent in a timeout, one segment sent and retransmitted, reads 1.0)
        "segs_sent": sent, "segs_retrans": retrans, "segs_lost": max(0.0, retrans - spurious),
    }


def system_interval(flows: Sequence[dict], t_max: float, dropped: float, offered: float) -> dict:
    """The system over one interval: sums over flows, loss at the bottleneck's drop point, Jain over goodput and
    over the active flows' throughput."""
    g = sum(f["goodput_bps"] for f in flows)
    t = sum(f["throughput_bps"] for f in flows)
    rtts = [f["rtt_s"] for f in flows if f["rtt_s"] is not None]
    mins = [f["min_rtt_s"] for f in flows if f.get("min_rtt_s") is not None]
    return {
        "goodput_bps": g, "throughput_bps": t,
        "eee": metrics.eee(t, g, t_max), "uar": metrics.uar(t, g, t_max),
        "loss": metrics.ratio(dropped, offered),
        "retrans_rate": metrics.ratio(sum(f["segs_retrans"] for f in flows), sum(f["segs_sent"] for f in flows)),
        "rtt_s": sum(rtts) / len(rtts) if rtts else None,
        "min_rtt_s": min(mins) if mins else None,
        "cwnd": None,
        "segs_sent": sum(f["segs_sent"] for f in flows), "segs_retrans": sum(f["segs_retrans"] for f in flows),
        "jain": metrics.jain([f["goodput_bps"] for f in flows]),
        "jain_throughput": jain_throughput(flows),
    }


def jain_throughput(rows: Sequence[dict]) -> float | None:
    """Jain's fairness index as study 001 defines it: over the flows' throughput (not goodput), of the flows
    active in the interval; None when none is."""
    xs = [r["throughput_bps"] for r in rows if r.get("active", True) and r.get("throughput_bps") is not None]
    return metrics.jain(xs) if xs else None


def active(span: tuple[float, float], a: float, b: float) -> bool:
    """Whether a flow sending over span (start, stop in seconds) sends in the interval [a, b] at all."""
    return span[0] < b and span[1] > a


def fair_shares(t_max: float, spans: Sequence[tuple[float, float]], a: float, b: float,
                paths: Sequence[Sequence] | None = None, capacity: dict | None = None) -> list[float | None]:
    """Each flow's fair share over [a, b] among the flows active then (a flow that has stopped or not yet started
    leaves its share to the others); None for a flow not active in [a, b]. One bottleneck: t_max divided equally.
    Several (paths: the constrained links each flow crosses, capacity: each link's payload capacity): the max-min
    fair shares."""
    on = [active(s, a, b) for s in spans]
    if paths is not None and capacity is not None:
        return max_min([p if x else [] for p, x in zip(paths, on)], capacity, on)
    n = sum(on)
    return [t_max / n if x else None for x in on]


def max_min(paths: Sequence[Sequence], capacity: dict, on: Sequence[bool]) -> list[float | None]:
    """Max-min fair rates by water-filling: the link whose capacity left, divided among its flows not yet fixed, is
    smallest fixes those flows at that rate; repeat. A flow crossing no constrained link gets the largest capacity
    (nothing here limits it more); an inactive flow None."""
    left = dict(capacity)
    rate: list[float | None] = [None] * len(paths)
    todo = {i for i, x in enumerate(on) if x and any(l in capacity for l in paths[i])}
    while todo:
        level, link = min((left[l] / n, l) for l in left
                          if (n := sum(1 for i in todo if l in paths[i])))
        fixed = [i for i in todo if link in paths[i]]
        for i in fixed:
            rate[i] = max(level, 0.0)
            for l in paths[i]:
                if l in left:
                    left[l] -= rate[i]
        todo -= set(fixed)
    free = max(capacity.values(), default=0.0)
    return [free if x and r is None else r for r, x in zip(rate, on)]


def network_capacity(paths: Sequence[Sequence], capacity: dict) -> float:
    """The most payload per second the flows together can carry over the constrained links they cross: the linear
    program max sum(x) subject to, on each link, the sum of its flows' x <= its capacity (x >= 0). A parking lot
    of N hops carries N links' worth with its long flows idle, which a max-min allocation does not reach.
    Without the program when a link every flow crosses is the least of all the links they cross: the flows
    together carry no more than it, and one flow alone carries that much (a tandem, a dumbbell with its access
    links)."""
    links = sorted(capacity)
    if not paths or not links:
        return 0.0
    crossed = [[l for l in p if l in capacity] for p in paths]
    if all(crossed):
        least = min(capacity[l] for p in crossed for l in p)
        if any(capacity[l] == least for l in set(crossed[0]).intersection(*crossed[1:])):
            return float(least)
    # lazy: scipy.optimize takes 0.8 s to import here and over a minute in a TCG guest
    from scipy.optimize import linprog
    a = [[1.0 if l in p else 0.0 for p in paths] for l in links]
    res = linprog([-1.0] * len(paths), A_ub=a, b_ub=[capacity[l] for l in links], bounds=(0, None), method="highs")
    return float(-res.fun) if res.success else float(sum(capacity.values()))
