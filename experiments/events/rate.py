"""`rate`: a's egress toward b is shaped to a new rate (htb's class changed in place, the queue kept), back to the
link's own after `for`. Only a shaped link (one with a rate) can change it."""
from __future__ import annotations

from typing import Literal

from ccrig.analysis import metrics
from ccrig.fields import RateField
from ccrig.qdiscs.shaper import CLASS, ROOT
from ccrig.topologies.topology import Topology
from ccrig.units import Rate, wire_bytes
from ccrig.experiments.events.base import LinkEvent, LinkState


def change_argv(dev: str, rate: Rate, mtu: int) -> list[str]:
    bps = f"{round(rate.bps(mtu + 14))}bit"
    return ["tc", "class", "change", "dev", dev, "parent", ROOT, "classid", CLASS, "htb", "rate", bps,
            "ceil", bps, "quantum", str(wire_bytes(mtu))]


class RateChange(LinkEvent):
    kind: Literal["rate"] = "rate"
    rate: RateField
    uses_dropper = False

    def check(self, topology: Topology, netem: bool) -> str | None:
        if topology.gso:   # tbf's `change` would also reset a fifo child's limit to tbf's own (fifo_set_limit)
            return (f"link {self.link}: a rate event needs htb's class, and topology.gso shapes with tbf; expected "
                    f"gso: false")
        if topology.egress_of(*self.ends).egress.rate is None:
            return (f"link {self.link} has no rate of its own to change (only a shaped link's htb class can "
                    f"change rate)")
        return None

    def capacity_while_on(self, topology: Topology) -> dict[tuple[str, str], float]:
        return {self.ends: metrics.payload_capacity(self.rate.bps(topology.wire), topology.mtu)}

    def _set(self, state: LinkState, rate: Rate) -> str:
        a, b = self.ends
        state.testbed.run(a, change_argv(state.testbed.egress_device(a, b), rate, state.topology.mtu))
        return f"rate {rate}"

    def begin(self, state: LinkState) -> str:
        return self._set(state, self.rate)

    def end(self, state: LinkState) -> str:
        return self._set(state, state.topology.egress_of(*self.ends).egress.rate) + " (the link's own)"
