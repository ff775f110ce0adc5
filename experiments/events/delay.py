"""`delay`: a's egress toward b delays by a new one-way time (netem changed in place), back to the link's own
after `for`. Needs netem, and a link that has a delay of its own (so its netem exists to change)."""
from __future__ import annotations

import dataclasses
from typing import Literal

from ccrig.fields import TimeField
from ccrig.qdiscs.shaper import LEAF
from ccrig.topologies.links import netem_args
from ccrig.topologies.topology import Topology
from ccrig.experiments.events.base import LinkEvent, LinkState


class DelayChange(LinkEvent):
    kind: Literal["delay"] = "delay"
    delay: TimeField
    needs_netem = True
    uses_dropper = False

    def check(self, topology: Topology, netem: bool) -> str | None:
        if not netem:
            return "a delay change needs netem, which this kernel lacks (the vm testbed's kernel has it)"
        if topology.egress_of(*self.ends).egress.delay <= 0:
            return f"link {self.link} has no delay of its own (no netem there to change); give it one"
        return None

    def _set(self, state: LinkState, delay: float) -> str:
        a, b = self.ends
        eg = dataclasses.replace(state.realised.egress_of(a, b).egress, delay=delay)
        dev = state.testbed.egress_device(a, b)
        state.testbed.run(a, ["tc", "qdisc", "change", "dev", dev, "handle", LEAF, *netem_args(eg)])
        return f"delay {delay * 1e3:g}ms"

    def begin(self, state: LinkState) -> str:
        return self._set(state, self.delay)

    def end(self, state: LinkState) -> str:
        return self._set(state, state.topology.egress_of(*self.ends).egress.delay) + " (the link's own)"
