"""The tandem: a chain of bottleneck links, through pairs crossing all of them and cross traffic entering and
leaving along the way, each pair with its own propagation delay if asked (Keshav's scenarios 7 and 8: three
potential bottlenecks in tandem made by cross traffic, sources with different round-trip times).

    T1 ─┐                                                  ┌─ T1'
        r0 ══ hop 1 ══ r1 ══ hop 2 ══ r2 ... r(N-1) ══ hop N ══ rN
    C1 ─┘      └─ C1'  C2 ─┘   └─ C2'      CN ─┘       └─ CN'

Hop i is router r(i-1)'s egress toward r(i): htb at `link.rate`, the discipline and buffer under it, on every hop
(the parking lot's hop: topologies/named/parking_lot.py). Through pairs send from r0's side to rN's. Cross pairs come in
groups: `cross: K` is K pairs per hop, hop i's entering at r(i-1) and leaving after hop i at r(i); `cross:
[{first, last, count}, ...]` lists the groups instead, each entering before hop `first` (at r(first-1)) and leaving
after hop `last` (at r(last)), for cross traffic that shares more than one hop.

Flows take the pairs in this order, so a spec's `flows:` groups line up with them: the through pairs first (t1, t2,
...), then the cross groups in order (with `cross: K`, hop 1's, hop 2's, ...); group j's pairs are cj_1, cj_2, ...,
each receiver named after its sender with a `d`. `per_pair` entry i is the pair at position i+1 in that order: its
keys replace `access_rate` (rate), `rtt` and `loss` for that pair alone. The added RTT is split as on the dumbbell:
half on the pair's last router's egress toward its receiver (data), half on its first router's toward its sender
(ACKs); loss on the receiver's link. Each flow's fair share (T_max) is its max-min fair share over the hops it
crosses, which is why every hop needs a buffer: the hops are the queues the run measures and shares out.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ccrig.errors import field_error
from ccrig.fields import RateField, RatioField, TimeField
from .dumbbell import (Bottleneck, MtuField, PairLink, add_pair_links, check_chained_hop, check_pair_count,
                       check_per_pair, check_rate, pair_settings)
from ..loss import LossModel
from .parking_lot import MAX_HOPS, chain
from ..topology import Topology

# pairs in one group, as the parking lot's
MAX_GROUP = 64


class CrossGroup(BaseModel):
    """Cross pairs entering before hop `first` and leaving after hop `last` (hops count from 1)."""
    model_config = ConfigDict(extra="forbid")
    first: int = Field(ge=1, le=MAX_HOPS)
    last: int = Field(ge=1, le=MAX_HOPS)
    count: int = Field(1, ge=0, le=MAX_GROUP)


class TandemPairs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    through: int = Field(1, ge=0, le=MAX_GROUP)   # pairs crossing every hop
    # per hop, pairs crossing that hop alone; or the groups, each over the hops it names
    cross: int | list[CrossGroup] = Field(1)

    @field_validator("cross")
    @classmethod
    def _cross_count(cls, v):
        # bounded here, not left to the CrossGroups groups() makes: that error named `topology.count`
        if isinstance(v, int) and not 0 <= v <= MAX_GROUP:
            raise ValueError(f"expected 0 to {MAX_GROUP} pairs per hop, or a list of groups {{first, last, count}}")
        return v

    def groups(self, hops: int) -> list[CrossGroup]:
        if isinstance(self.cross, int):
            return [CrossGroup(first=i, last=i, count=self.cross) for i in range(1, hops + 1)]
        return self.cross


class TandemSpec(BaseModel):
    """topology: {name: tandem, hops: 3, link: {rate, buffer, qdisc}, pairs: {through: 1, cross: 1}, rtt, loss,
    access_rate, per_pair: [{rate, rtt, loss}, ...]}"""
    model_config = ConfigDict(extra="forbid")
    name: Literal["tandem"] = "tandem"
    hops: int = Field(3, ge=2, le=MAX_HOPS)
    link: Bottleneck
    pairs: TandemPairs = TandemPairs()
    rtt: TimeField = 0.0
    # a ratio, or {rate} / {gilbert: {...}} (topologies/loss/), on each receiver's link, as the dumbbell's
    loss: RatioField | LossModel = 0.0
    access_rate: RateField | None = None
    # entry i: the pair at position i+1 (through pairs first), each key overriding access_rate, rtt and loss
    per_pair: list[PairLink] = []
    mtu: MtuField = 1500
    gso: bool = False   # as the dumbbell's (topologies/named/dumbbell.py)

    @model_validator(mode="after")
    def _ranges(self):
        wire = self.mtu + 14
        check_chained_hop("topology.link", self.link, wire, self.rtt)
        check_rate("topology.access_rate", self.access_rate, wire)
        if not isinstance(self.pairs.cross, int):
            for j, g in enumerate(self.pairs.cross):
                if not g.first <= g.last <= self.hops:
                    raise field_error(f"topology.pairs.cross[{j}]", f"first {g.first}, last {g.last}",
                                      f"hops first <= last <= {self.hops} (the topology's hops, counted from 1)")
        n = self.n_pairs
        if n == 0:
            raise field_error("topology.pairs", "no pairs", "at least one pair, through or cross")
        # the address plan: one link per hop, two per pair
        if self.hops + 2 * n > 512:
            raise field_error("topology.pairs", f"{n} pairs over {self.hops} hops", "at most 512 links in all "
                              "(two per pair, one per hop)")
        check_per_pair(self.per_pair, wire)
        check_pair_count(self.per_pair, n)
        return self

    @property
    def n_pairs(self) -> int:
        return self.pairs.through + sum(g.count for g in self.pairs.groups(self.hops))

    def build(self, flows: int) -> Topology:
        topo = Topology("tandem", mtu=self.mtu, gso=self.gso)
        routers = chain(topo, self.hops, self.link)
        groups = [(f"t{k}", routers[0], routers[-1]) for k in range(1, self.pairs.through + 1)]
        groups += [(f"c{j}_{k}", routers[g.first - 1], routers[g.last])
                   for j, g in enumerate(self.pairs.groups(self.hops), 1) for k in range(1, g.count + 1)]
        for i, (name, first, last) in enumerate(groups):
            s, d = topo.add_node(name), topo.add_node(f"{name}d")
            add_pair_links(topo, s, first, last, d, *pair_settings(self.per_pair, i, self.access_rate, self.rtt,
                                                                   self.loss))
            topo.pairs.append((s, d))
        return topo


TOPOLOGY = TandemSpec
