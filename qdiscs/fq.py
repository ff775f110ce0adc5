"""Fair queueing: fq (per-flow queues with round-robin and pacing, tc-fq(8)) and sfq (stochastic fairness
queueing, tc-sfq(8)), the disciplines of Keshav's FQ scenarios: a misbehaving flow fills only its own queue.

On a router fq has no sockets to go by, so it separates flows by the packet's hash (addresses and ports),
as sfq does; pacing only applies to locally generated traffic.
"""
from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import field_validator

from ccrig.errors import field_error
from ccrig.fields import RateField, TimeField
from .base import Bytes, Count, Qdisc, check_positive, packet_limit, tc_time, wire_bytes


class Fq(Qdisc):
    kind: Literal["fq"] = "fq"
    module: ClassVar[str] = "sch_fq"
    kconfig: ClassVar[str] = "NET_SCH_FQ"
    # tc -s: flows, inactive, throttled go up and down; gc, highprio, ... count
    gauges: ClassVar[frozenset[str]] = frozenset({"flows", "inactive", "throttled"})
    limit: Count = None               # packets in all flows (default: the link's buffer)
    flow_limit: Count = None          # packets per flow (default: the limit shared out among the flows)
    quantum: Bytes = None             # bytes a flow may send per round (kernel default 2 MTU)
    initial_quantum: Bytes = None
    buckets: int | None = None        # hash table size (power of two)
    maxrate: RateField | None = None  # per-flow pacing cap
    pacing: bool = True
    ce_threshold: TimeField | None = None



    @field_validator("buckets")
    @classmethod
    def _pow2(cls, v):
        if v is not None and (v < 1 or v & (v - 1)):
            raise ValueError(f"got {v!r}; expected a power of two such as 1024")
        return v

    def qdisc_args(self, buffer, rate_bps, mtu, flows: int = 1):
        limit = packet_limit(self.limit, buffer, mtu)
        args = ["fq", "limit", str(limit)]
        # fq drops any arrival once `limit` packets are queued, whoever holds them, so a flow allowed as many
        # packets as the whole limit (the kernel's flow_limit 100 against a 100-packet buffer) can fill it and
        # starve the others: give each flow its share of the buffer, as the studies' FQ does
        flow_limit = self.flow_limit if self.flow_limit is not None else max(1, math.ceil(limit / max(1, flows)))
        args += ["flow_limit", str(flow_limit)]
        for name in ("quantum", "initial_quantum", "buckets"):
            if getattr(self, name) is not None:
                args += [name, str(getattr(self, name))]
        if self.maxrate is not None:
            args += ["maxrate", self.maxrate.tc(wire_bytes(mtu))]
        if self.ce_threshold is not None:
            args += ["ce_threshold", tc_time(self.ce_threshold)]
        args.append("pacing" if self.pacing else "nopacing")
        return args

    def setup_argv(self, dev, parent, handle, buffer, rate_bps, mtu, flows, flow_sources=None):
        return [["tc", "qdisc", "add", "dev", dev, "parent", parent, "handle", handle,
                 *self.qdisc_args(buffer, rate_bps, mtu, flows)]]


class Sfq(Qdisc):
    kind: Literal["sfq"] = "sfq"
    module: ClassVar[str] = "sch_sfq"
    kconfig: ClassVar[str] = "NET_SCH_SFQ"
    limit: int | None = None          # packets in all flows (default: the link's buffer, kernel cap 65535)
    depth: Count = None               # packets per flow (kernel default 127)
    divisor: int | None = None        # hash buckets (power of two, kernel default 1024)
    quantum: Bytes = None             # bytes per round (kernel default 1 MTU)
    perturb: int | None = None        # seconds between hash reseeds (0: never, the kernel's default)
    headdrop: bool = False            # drop from the head of the longest flow rather than the tail

    @field_validator("limit")
    @classmethod
    def _limit(cls, v):
        check_positive(v)
        if v is not None and not 2 <= v <= 65535:
            raise ValueError(f"got {v!r}; expected 2 to 65535 packets")
        return v


    @field_validator("perturb")
    @classmethod
    def _perturb(cls, v):
        return check_positive(v, allow_zero=True)


    @field_validator("divisor")
    @classmethod
    def _pow2(cls, v):
        if v is not None and (v < 1 or v > 65536 or v & (v - 1)):
            raise ValueError(f"got {v!r}; expected a power of two up to 65536, such as 1024")
        return v

    def qdisc_args(self, buffer, rate_bps, mtu):
        limit = packet_limit(self.limit, buffer, mtu)
        if not 2 <= limit <= 65535:
            raise field_error("buffer", f"{limit}pkt", "2 to 65535 packets for sfq")
        args = ["sfq", "limit", str(limit)]
        for name in ("depth", "divisor", "quantum", "perturb"):
            if getattr(self, name) is not None:
                args += [name, str(getattr(self, name))]
        if self.headdrop:
            args.append("headdrop")
        return args
