"""`down`: the link passes nothing, both ways (a handoff: `for: 0.2s`, `every: 5s`).

Realised by the BPF program on both ends' ingress dropping everything (topologies/loss/loss.bpf.c's DOWN slot),
not by `ip link set down`: that would take the link's routes with it and the runner would have to rebuild them.
Packets dropped while down are counted apart from random loss, and both count into the system loss.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from ccrig.experiments.events.base import LinkEvent, LinkState


class Down(LinkEvent):
    kind: Literal["down"] = "down"
    both_ways = True
    # at each far end's ingress: packets already queued at the near end would cross otherwise
    hook = "ingress"

    def capacity_while_on(self, topology) -> dict[tuple[str, str], float]:
        return {d: 0.0 for d in self.directions()}

    def _set(self, state: LinkState, down: bool) -> None:
        # both ends at once: each is a bpftool run (tens of ms on a busy machine), one after the other would
        # leave one direction open that much longer
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda d: state.droppers[(*d, self.hook)].set_down(down), self.directions()))

    def begin(self, state: LinkState) -> str:
        self._set(state, True)
        return "down"

    def end(self, state: LinkState) -> str:
        self._set(state, False)
        return "up"
