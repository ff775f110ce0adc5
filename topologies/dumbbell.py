"""The dumbbell: N senders -> router r1 -> bottleneck -> router r2 -> N receivers, routed IPv4.

    s1 ─┐                         ┌─ d1
    s2 ─┤── r1 ══ bottleneck ══ r2 ├─ d2
    sN ─┘                         └─ dN

The bottleneck is r1's egress toward r2: htb at `rate`, the discipline and buffer under it. It sits on a
router, not on a sender's own interface, because TCP small queues keep a local qdisc nearly empty. Added
delay (`rtt`) and random loss sit on the routers' egress toward the hosts, after the bottleneck, so they
never share a queue with it: half of the RTT on r2 -> receiver (data), half on r1 -> sender (ACKs); loss
on the data path only.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ccrig.fields import RateField, RatioField, SizeField, TimeField
from ccrig.qdiscs import Pfifo, qdisc_union
from .topology import Egress, Topology

QdiscField = qdisc_union()


class Bottleneck(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: RateField
    buffer: SizeField | None = None
    qdisc: QdiscField = Pfifo()


class Access(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: RateField | None = None


class DumbbellSpec(BaseModel):
    """topology: {name: dumbbell, bottleneck: {rate, buffer, qdisc}, rtt, loss, access: {rate}, pairs}"""
    model_config = ConfigDict(extra="forbid")
    name: Literal["dumbbell"] = "dumbbell"
    bottleneck: Bottleneck
    access: Access = Access()
    rtt: TimeField = 0.0
    loss: RatioField = 0.0
    # sender/receiver pairs; by default one pair per flow
    pairs: int | None = None
    mtu: int = 1500

    def build(self, flows: int) -> Topology:
        n = self.pairs or flows
        topo = Topology("dumbbell", mtu=self.mtu)
        r1, r2 = topo.add_node("r1", "router"), topo.add_node("r2", "router")
        b = self.bottleneck
        topo.add_link(r1, r2, a_to_b=Egress(rate=b.rate, buffer=b.buffer, qdisc=b.qdisc))
        topo.bottleneck = (r1, r2)
        access = Egress(rate=self.access.rate)
        for i in range(1, n + 1):
            s, d = topo.add_node(f"s{i}"), topo.add_node(f"d{i}")
            topo.add_link(s, r1, a_to_b=access, b_to_a=Egress(rate=self.access.rate, delay=self.rtt / 2))
            topo.add_link(r2, d, a_to_b=Egress(rate=self.access.rate, delay=self.rtt / 2, loss=self.loss),
                          b_to_a=access)
            topo.pairs.append((s, d))
        return topo
