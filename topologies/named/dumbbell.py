"""The dumbbell: N senders -> router r1 -> bottleneck -> router r2 -> N receivers, routed IPv4.

    s1 ─┐                         ┌─ d1
    s2 ─┤── r1 ══ bottleneck ══ r2 ├─ d2
    sN ─┘                         └─ dN

The bottleneck is r1's egress toward r2: htb at `rate`, the discipline and buffer under it. It sits on a
router, not on a sender's own interface, because TCP small queues keep a local qdisc nearly empty. Added
delay (`rtt`) and random loss sit on the routers' egress toward the hosts, after the bottleneck, so they
never share a queue with it: half of the RTT on r2 -> receiver (data), half on r1 -> sender (ACKs); loss
on the data path only.

`per_pair` gives host pairs access links of their own: entry i is pair i+1 (s{i+1} -> d{i+1}), and each of its
keys replaces the topology-wide one for that pair alone (`rate`: access.rate, `rtt`, `loss`), e.g. an error model
on one receiver's link (study 001) or a longer propagation delay for one source (study 003, scenario 8).
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from ccrig.errors import field_error
from ccrig.fields import RateField, RatioField, SizeField, TimeField, count_range
from ccrig.units import RATE_RANGE, UnitError, buffer_problem, check_bps
from ccrig.qdiscs import qdisc_union
from ccrig.qdiscs.fifo import Pfifo
from ..delayline import check_room
from ..loss import GilbertElliott, LossModel
from ..topology import Egress, Topology

QdiscField = qdisc_union()
# an added round-trip time beyond a minute is no path a congestion controller meets (TCP's RTO tops out at 120 s)
MAX_RTT_S = 60.0


def _mtu(v: int) -> int:
    # 576: the IPv4 datagram every host must take (RFC 791); 9000: jumbo frames, the most real NICs carry
    if not 576 <= v <= 9000:
        raise ValueError("expected an MTU of 576..9000 bytes")
    return v


MtuField = Annotated[int, AfterValidator(_mtu)]

# Sender/receiver host pairs a topology can address: link i is the subnet 198.18.i.0/24, then 198.19.(i-256).0/24
# (topology.py), 512 links in all; a dumbbell of n pairs has 2n + 1 links, a pause_chain of n > 1 pairs 2n + 3.
MAX_PAIRS = 254
PairCount = Annotated[int, AfterValidator(count_range("host pairs", MAX_PAIRS, "the topology's address plan has "
                                                      "512 links, two per pair"))]


def check_rate(path: str, rate, wire_bytes: int, scale: float = 1.0) -> None:
    """A link's rate as the run shapes it (packets/s counted with full-size frames, times a topology's scale)
    must be one tc can shape (ccrig.units)."""
    if rate is None:
        return
    try:
        check_bps(rate.bps(wire_bytes) * scale)
    except UnitError:
        scaled = f" times scale {scale:g}" if scale != 1 else ""
        raise field_error(path, str(rate), f"a rate{scaled} {RATE_RANGE}, counted in bits with "
                                           f"{wire_bytes}-byte frames") from None


def check_hop(path: str, link, wire_bytes: int, rtt: float) -> None:
    """A shaped hop's rate and buffer (a Bottleneck at `path`), and the topology's added RTT."""
    check_rate(f"{path}.rate", link.rate, wire_bytes)
    if link.buffer is not None and buffer_problem(link.buffer, wire_bytes):
        raise field_error(f"{path}.buffer", str(link.buffer), buffer_problem(link.buffer, wire_bytes))
    check_rtt("topology.rtt", rtt)
    check_room("topology.rtt", rtt / 2, link.rate, wire_bytes, wire_bytes - 14)


def check_rtt(path: str, rtt: float | None) -> None:
    """An added RTT (None: not given) within what a spec may ask."""
    if rtt is not None and rtt > MAX_RTT_S:
        raise field_error(path, f"{rtt:g}s", f"at most {MAX_RTT_S:g}s")


def check_chained_hop(path: str, link, wire_bytes: int, rtt: float) -> None:
    """check_hop for the hops of a chain (parking lot, tandem), which must each have a buffer: without one a hop
    is no queue of its own to Topology.queues(), so it would be neither measured nor shared out (T_max)."""
    if link.buffer is None:
        raise field_error(f"{path}.buffer", None, "a buffer such as 100pkt or 64kb: every hop of a chain is a "
                                                   "measured queue")
    check_hop(path, link, wire_bytes, rtt)


class Bottleneck(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: RateField
    buffer: SizeField | None = None
    qdisc: QdiscField = Pfifo()


class Access(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: RateField | None = None


class PairLink(BaseModel):
    """One host pair's own access links (`per_pair` entries): each key given replaces the topology-wide value for
    that pair alone; a key left out keeps it."""
    model_config = ConfigDict(extra="forbid")
    rate: RateField | None = None                # both directions of the pair's two access links
    rtt: TimeField | None = None                 # split as the topology's: half toward the sender, half the receiver
    loss: RatioField | LossModel | None = None   # on the receiver's link (the data path), as the topology's

    def resolve(self, rate, rtt: float, loss) -> tuple:
        """(rate, rtt, loss) for this pair, from the topology-wide ones."""
        return (self.rate if self.rate is not None else rate, self.rtt if self.rtt is not None else rtt,
                self.loss if self.loss is not None else loss)


def realised_loss(loss) -> float | GilbertElliott:
    """A `loss:` value as a link's Egress carries it: a ratio, or the Gilbert-Elliott chain."""
    return loss.realised() if isinstance(loss, LossModel) else loss


def check_per_pair(per_pair: list[PairLink], wire: int) -> None:
    """Each entry's rate and rtt in the ranges the topology-wide ones have."""
    for i, entry in enumerate(per_pair):
        check_rate(f"topology.per_pair[{i}].rate", entry.rate, wire)
        check_rtt(f"topology.per_pair[{i}].rtt", entry.rtt)


def check_pair_count(per_pair: list[PairLink], pairs: int) -> None:
    """No entry may name a pair the topology does not build (a typo or a miscount, never ignored)."""
    if len(per_pair) > pairs:
        raise field_error("topology.per_pair", f"{len(per_pair)} entries",
                          f"at most {pairs}, one per host pair the topology builds (entry i is pair i+1)")


def pair_settings(per_pair: list[PairLink], i: int, rate, rtt: float, loss) -> tuple:
    """Pair i's (0-based) access rate, RTT and realised loss: its own entry's where it has one."""
    if i < len(per_pair):
        rate, rtt, loss = per_pair[i].resolve(rate, rtt, loss)
    return rate, rtt, realised_loss(loss)


def add_pair_links(topo: Topology, sender: str, first: str, last: str, receiver: str, rate, rtt: float,
                   loss) -> None:
    """A host pair's two access links: sender - first router, last router - receiver. The added RTT sits on the
    routers' egress toward the hosts, half each way (data: last -> receiver, ACKs: first -> sender), and the loss
    on the data path, so neither shares a queue with a bottleneck."""
    access = Egress(rate=rate)
    topo.add_link(sender, first, a_to_b=access, b_to_a=Egress(rate=rate, delay=rtt / 2))
    topo.add_link(last, receiver, a_to_b=Egress(rate=rate, delay=rtt / 2, loss=loss), b_to_a=access)


class DumbbellSpec(BaseModel):
    """topology: {name: dumbbell, bottleneck: {rate, buffer, qdisc}, rtt, loss, access: {rate}, pairs,
    per_pair: [{rate, rtt, loss}, ...], mtu, gso}"""
    model_config = ConfigDict(extra="forbid")
    name: Literal["dumbbell"] = "dumbbell"
    bottleneck: Bottleneck
    access: Access = Access()
    rtt: TimeField = 0.0
    # a ratio, or {rate} / {gilbert: {p, r, loss_bad, loss_good}} (topologies/loss/), on each receiver's link
    loss: RatioField | LossModel = 0.0
    # sender/receiver pairs; by default one pair per flow
    pairs: PairCount | None = None
    # entry i: pair i+1's own access rate, RTT and loss, each overriding access.rate, rtt and loss
    per_pair: list[PairLink] = []
    mtu: MtuField = 1500
    # senders keep TCP's super-packets and each shaped link cuts them into wire packets (qdiscs/shaper.py):
    # a higher ceiling for one machine, queues still counted in wire packets
    gso: bool = False

    @model_validator(mode="after")
    def _ranges(self):
        wire = self.mtu + 14
        check_hop("topology.bottleneck", self.bottleneck, wire, self.rtt)
        check_rate("topology.access.rate", self.access.rate, wire)
        check_per_pair(self.per_pair, wire)
        for i, entry in enumerate(self.per_pair):   # a pair's own delay line fills at most at the bottleneck's rate
            check_room(f"topology.per_pair[{i}].rtt", (entry.rtt or 0.0) / 2, self.bottleneck.rate, wire, self.mtu)
        if self.pairs is not None:   # else one pair per flow: checked when built, where the flows are known
            check_pair_count(self.per_pair, self.pairs)
        return self

    @property
    def link_loss(self) -> float | GilbertElliott:
        return realised_loss(self.loss)

    def build(self, flows: int) -> Topology:
        n = self.pairs or flows
        check_pair_count(self.per_pair, n)
        topo = Topology("dumbbell", mtu=self.mtu, gso=self.gso)
        r1, r2 = topo.add_node("r1", "router"), topo.add_node("r2", "router")
        b = self.bottleneck
        topo.add_link(r1, r2, a_to_b=Egress(rate=b.rate, buffer=b.buffer, qdisc=b.qdisc))
        topo.bottleneck = (r1, r2)
        for i in range(1, n + 1):
            s, d = topo.add_node(f"s{i}"), topo.add_node(f"d{i}")
            add_pair_links(topo, s, r1, r2, d, *pair_settings(self.per_pair, i - 1, self.access.rate, self.rtt,
                                                              self.loss))
            topo.pairs.append((s, d))
        return topo


TOPOLOGY = DumbbellSpec
