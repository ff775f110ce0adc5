"""The PAUSE study's chain (Malhotra et al., Fig. 3): two store-and-forward nodes, the link between them pausable.

    s1 ─ link A (λ1) ─▶ n1 [B1] ─ link B (μ1, paused: μ2) ─▶ n2 [B2] ─ link C (ν) ─▶ d1
                                         ▲                      │
                                         └──── XOFF / XON ──────┘  (occupancy of B2 above T1 / below T2)

Node 1's queue (B1) is its egress on link B, node 2's (B2) its egress on link C: both drop-tail pfifo on
routers, where TCP small queues cannot hide them. Link A limits what the senders can offer (λ1); with one
sender host it is the sender's own egress, which TCP small queues keep from dropping, so B1 and B2 are the
only drop points as in the study's model. With several host pairs an aggregation router `a` feeds link A
and a router `c` fans out after link C. The RTT is added delay (netem) on the receivers' egress, the ACK path,
so it never shares a queue with B1 or B2.

The study's rates are tiny (μ1 = 100, μ2 = 2, ν = 15 packets/s of 1526 bytes; B1 = 10, B2 = 20). `scale`
multiplies every rate and divides the RTT, keeping every ratio and every packet count, so a run takes
1/scale of the time; `scaling()` says what was used, for the archive.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, field_validator, model_validator

from ccrig.errors import field_error
from ccrig.fields import RateField, SizeField, TimeField
from ccrig.units import Rate, Size, UnitError, buffer_problem, parse_rate, wire_bytes
from ccrig.qdiscs.fifo import Pfifo
from .dumbbell import MtuField, PairCount, check_rate, check_rtt
from ..pause.agent.controller import MAX_QUANTA
from ..topology import Egress, Topology

_ZERO = re.compile(r"\s*0*\.?0*\s*(pps|bit|kbit|mbit|gbit|bps)?\s*", re.I)


def _paused_rate(v):
    """μ2: a rate, or 0 for a full stop (PAUSE as 802.3x defines it)."""
    if isinstance(v, Rate):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v == 0:
            return 0
        raise ValueError('expected 0 (stop) or a rate with a unit such as "2pps" or "24kbit"')
    if isinstance(v, str) and _ZERO.fullmatch(v) and any(ch.isdigit() for ch in v):
        return 0
    try:
        return parse_rate(v)
    except UnitError as e:
        raise ValueError(f"{e}, or 0 to stop") from None


PausedRateField = Annotated[Any, BeforeValidator(_paused_rate), PlainSerializer(str)]


class ChainLink(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: RateField
    buffer: SizeField | None = None

    @field_validator("buffer")
    @classmethod
    def _packets(cls, v):
        # thresholds and the study's buffers count packets; a byte buffer would make T1 <= B2 meaningless
        if v is not None and (v.packets is None or v.packets < 1):
            raise ValueError('expected a buffer in packets such as "20pkt"')
        return v


class PauseSettings(BaseModel):
    """topology.pause: the XOFF/XON rule on link B (thresholds in packets of node 2's queue B2)."""
    model_config = ConfigDict(extra="forbid")
    # emulated: the controller shapes link B (tbf); frames: the controller sends real 802.3x frames to node 1's
    # NIC (needs rx pause there); ethtool: the NICs' own flow control; auto: ethtool where the NICs support
    # it, else emulated, with a note in the archive
    mode: Literal["emulated", "frames", "ethtool", "auto"] = "emulated"
    high: int                       # T1: XOFF when the occupancy exceeds it
    low: int | None = None          # T2: XON when the occupancy falls below it (default: T1)
    paused_rate: PausedRateField = 0  # μ2; 0 = stop
    quanta: int | None = None       # 802.3x pause time per XOFF (512 bit times of link B); None = XOFF until XON
    refresh: TimeField | None = None  # XOFF refresh while congested (default: half the pause time)
    poll: TimeField = 100e-6        # shortest interval between two reads of B2

    @field_validator("high", "low")
    @classmethod
    def _count(cls, v):
        if v is not None and v < 1:
            raise ValueError("expected a threshold of at least 1 packet")
        return v

    @field_validator("poll")
    @classmethod
    def _poll(cls, v):
        # the controller reads B2 at most this often: below 10 us it only burns a core, above 1 s PAUSE is late
        if not 10e-6 <= v <= 1.0:
            raise ValueError("expected a time from 10us to 1s")
        return v

    @field_validator("quanta")
    @classmethod
    def _quanta(cls, v):
        if v is not None and not 1 <= v <= MAX_QUANTA:
            raise ValueError(f"expected 1..{MAX_QUANTA} pause quanta of 512 bit times (0 is XON, not a pause)")
        return v

    @property
    def t2(self) -> int:
        return self.high if self.low is None else self.low


class PauseChainSpec(BaseModel):
    """topology: {name: pause_chain, link_a: {rate}, link_b: {rate, buffer}, link_c: {rate, buffer},
    pause: {high, low, paused_rate, quanta, mode}, rtt, scale, pairs}"""
    model_config = ConfigDict(extra="forbid")
    name: Literal["pause_chain"] = "pause_chain"
    link_a: ChainLink               # λ1
    link_b: ChainLink               # μ1 and B1 (node 1's queue)
    link_c: ChainLink               # ν and B2 (node 2's queue)
    pause: PauseSettings | None = None
    rtt: TimeField = 0.0            # at scale 1; the run uses rtt / scale
    scale: float = 1.0
    pairs: PairCount = 1            # sender/receiver host pairs
    mtu: MtuField = 1500

    @model_validator(mode="after")
    def _consistent(self):
        if not self.scale > 0:
            raise field_error("topology.scale", self.scale, "a positive factor applied to every rate")
        if self.link_b.buffer is None:
            raise field_error("topology.link_b.buffer", None, 'node 1\'s buffer B1 in packets, e.g. "10pkt"')
        for name in ("link_a", "link_b", "link_c"):
            link = getattr(self, name)
            # the rates the run shapes: scaled, packets/s counted with full-size frames
            check_rate(f"topology.{name}.rate", link.rate, self.wire, self.scale)
            if link.buffer is not None and buffer_problem(link.buffer, self.wire):
                raise field_error(f"topology.{name}.buffer", str(link.buffer), buffer_problem(link.buffer, self.wire))
        check_rtt("topology.rtt", self.rtt)
        p = self.pause
        if p is None:
            return self
        if self.link_c.buffer is None:
            raise field_error("topology.link_c.buffer", None,
                              'node 2\'s buffer B2 in packets, e.g. "20pkt": PAUSE on link B needs a queue '
                              'downstream of it to watch')
        b2 = self.link_c.buffer.packets
        if p.high > b2:
            raise field_error("topology.pause.high", p.high,
                              f"T1 at most node 2's buffer B2 = {b2} packets (T1 = B2 means no PAUSE)")
        if p.t2 > p.high:
            raise field_error("topology.pause.low", p.low, f"T2 at most the high threshold T1 = {p.high}")
        if p.paused_rate != 0:
            check_rate("topology.pause.paused_rate", p.paused_rate, self.wire, self.scale)
        mu1 = self.link_b.rate.bps(self.wire)
        if p.paused_rate != 0 and p.paused_rate.bps(self.wire) >= mu1:
            raise field_error("topology.pause.paused_rate", str(p.paused_rate),
                              f"0 (stop) or a rate below link B's rate {self.link_b.rate}")
        if p.quanta is not None and p.refresh is not None:
            pause_s = p.quanta * 512 / (mu1 * self.scale)
            if p.refresh >= pause_s:
                raise field_error("topology.pause.refresh", f"{p.refresh:g}s",
                                  f"shorter than the pause time ({p.quanta} quanta = {pause_s:g}s at the "
                                  f"scaled rate), or node 1 resumes between refreshes")
        return self

    @property
    def wire(self) -> int:
        """Bytes of one full-size packet on the wire: what a packets/s rate is converted with."""
        return wire_bytes(self.mtu)

    def rate_bps(self, rate: Rate | int) -> float:
        """A rate of the spec as the run uses it: in bit/s, scaled."""
        return 0.0 if rate == 0 else rate.bps(self.wire) * self.scale

    def _scaled(self, rate: Rate) -> Rate:
        return Rate(bits_per_s=self.rate_bps(rate))

    def scaling(self) -> dict:
        """What `scale` did, for the archive (env.json / summary.json)."""
        p = self.pause
        return {
            "scale": self.scale,
            "note": "every rate multiplied and the RTT divided by scale; buffers and thresholds in packets kept",
            "wire_bytes": self.wire,
            "link_a_bps": self.rate_bps(self.link_a.rate),
            "link_b_bps": self.rate_bps(self.link_b.rate),
            "link_c_bps": self.rate_bps(self.link_c.rate),
            "paused_bps": None if p is None else self.rate_bps(p.paused_rate),
            "rtt_s": self.rtt / self.scale,
        }

    def build(self, flows: int) -> Topology:
        topo = Topology("pause_chain", mtu=self.mtu)
        n1, n2 = topo.add_node("n1", "router"), topo.add_node("n2", "router")
        link_a = Egress(rate=self._scaled(self.link_a.rate), buffer=self.link_a.buffer)
        ack_delay = Egress(delay=self.rtt / self.scale)
        if self.pairs == 1:
            senders = [topo.add_node("s1")]
            topo.add_link(senders[0], n1, a_to_b=link_a)
        else:
            a = topo.add_node("a", "router")
            senders = [topo.add_node(f"s{i}") for i in range(1, self.pairs + 1)]
            for s in senders:
                topo.add_link(s, a)
            # the aggregation queue must not be a drop point of its own: deep unless the spec says otherwise
            topo.add_link(a, n1, a_to_b=Egress(rate=link_a.rate, buffer=self.link_a.buffer or _packets(1000)))
        topo.add_link(n1, n2, a_to_b=Egress(rate=self._scaled(self.link_b.rate), buffer=self.link_b.buffer,
                                            qdisc=Pfifo()))
        link_c = Egress(rate=self._scaled(self.link_c.rate), buffer=self.link_c.buffer, qdisc=Pfifo())
        if self.pairs == 1:
            receivers = [topo.add_node("d1")]
            topo.add_link(n2, receivers[0], a_to_b=link_c, b_to_a=ack_delay)
            topo.bottleneck = (n2, receivers[0])
        else:
            c = topo.add_node("c", "router")
            topo.add_link(n2, c, a_to_b=link_c)
            topo.bottleneck = (n2, c)
            receivers = [topo.add_node(f"d{i}") for i in range(1, self.pairs + 1)]
            for d in receivers:
                topo.add_link(c, d, b_to_a=ack_delay)
        topo.pairs = list(zip(senders, receivers))
        return topo

    def pause_nodes(self, topo: Topology) -> tuple[tuple[str, str], tuple[str, str]]:
        """((node 1, its peer on link B), (node 2, its peer on link C)): where the pausable transmitter and
        the watched queue are, as (node, toward) pairs for Testbed.egress_device."""
        return ("n1", "n2"), topo.bottleneck


def _packets(n: int):
    return Size(packets=n)


TOPOLOGY = PauseChainSpec
