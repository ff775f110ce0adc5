"""The parking lot: a chain of bottlenecks, long flows crossing all of them, short ones crossing one each
(Keshav's scenario 6; the classic test of fairness across several bottlenecks).

    L1 ─┐                                         ┌─ L1'
        r0 ══ hop 1 ══ r1 ══ hop 2 ══ r2 ... rN ──┘
    S1 ─┘      └─ S1'  S2 ─┘   └─ S2'

Hop i is router r(i-1)'s egress toward r(i): htb at `rate`, the discipline and buffer under it (the dumbbell's
bottleneck, on every hop). Long pairs send from r0's side to rN's; hop i's short pairs from r(i-1)'s side to
r(i)'s. Flows take the pairs in this order, so a spec's `flows:` groups line up with them: the `long` pairs first,
then hop 1's `short` pairs, hop 2's, and so on. The added RTT is split as on the dumbbell: half on the last router's
egress toward each receiver (data), half on the first router's toward each sender (ACKs). Each flow's fair share
(T_max) is its max-min fair share over the hops it crosses.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ccrig.errors import field_error
from ccrig.fields import RateField, TimeField
from .dumbbell import Bottleneck, MtuField, add_pair_links, check_chained_hop, check_rate
from ..topology import Egress, Topology

MAX_HOPS = 16


def chain(topo: Topology, hops: int, link: Bottleneck) -> list[str]:
    """Routers r0..r(hops) in a line, each hop r(i-1) -> r(i) shaped as `link` says; the first hop is the
    topology's bottleneck (the one a single-bottleneck reader names). Returns the routers."""
    routers = [topo.add_node(f"r{i}", "router") for i in range(hops + 1)]
    hop = Egress(rate=link.rate, buffer=link.buffer, qdisc=link.qdisc)
    for a, b in zip(routers, routers[1:]):
        topo.add_link(a, b, a_to_b=hop)
    topo.bottleneck = (routers[0], routers[1])
    return routers


class Groups(BaseModel):
    model_config = ConfigDict(extra="forbid")
    long: int = Field(1, ge=0, le=64)    # pairs crossing every hop
    short: int = Field(1, ge=0, le=64)   # pairs crossing each hop alone, per hop


class ParkingLotSpec(BaseModel):
    """topology: {name: parking_lot, hops: 3, link: {rate, buffer, qdisc}, rtt, pairs: {long: 1, short: 1},
    access: {rate}}"""
    model_config = ConfigDict(extra="forbid")
    name: Literal["parking_lot"] = "parking_lot"
    hops: int = Field(2, ge=2, le=MAX_HOPS)
    link: Bottleneck
    pairs: Groups = Groups()
    rtt: TimeField = 0.0
    access_rate: RateField | None = None
    mtu: MtuField = 1500
    gso: bool = False   # as the dumbbell's (topologies/named/dumbbell.py)

    @model_validator(mode="after")
    def _ranges(self):
        wire = self.mtu + 14
        check_chained_hop("topology.link", self.link, wire, self.rtt)
        check_rate("topology.access_rate", self.access_rate, wire)
        if self.pairs.long + self.pairs.short == 0:
            raise field_error("topology.pairs", "long 0, short 0", "at least one pair, long or short")
        # the address plan: hops links, plus two per pair
        n = self.pairs.long + self.hops * self.pairs.short
        if self.hops + 2 * n > 512:
            raise field_error("topology.pairs", f"{n} pairs over {self.hops} hops", "at most 512 links in all "
                              "(two per pair, one per hop)")
        return self

    def build(self, flows: int) -> Topology:
        topo = Topology("parking_lot", mtu=self.mtu, gso=self.gso)
        routers = chain(topo, self.hops, self.link)
        groups = [("l", routers[0], routers[-1], self.pairs.long)]
        groups += [(f"s{i}_", routers[i - 1], routers[i], self.pairs.short) for i in range(1, self.hops + 1)]
        for prefix, first, last, count in groups:
            for k in range(1, count + 1):
                s, d = topo.add_node(f"{prefix}{k}"), topo.add_node(f"{prefix}{k}d")
                add_pair_links(topo, s, first, last, d, self.access_rate, self.rtt, 0.0)
                topo.pairs.append((s, d))
        return topo


TOPOLOGY = ParkingLotSpec
