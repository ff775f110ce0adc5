"""Drop-tail: pfifo counts packets, bfifo counts bytes (tc-pfifo(8)).

The buffer comes from the link (`buffer: 100pkt` or `buffer: 64kb`) unless `limit` is given here. Packet limits
mean wire packets only because every emulated interface sends wire-sized packets (see topologies/netns.py).
"""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import field_validator

from .base import Qdisc, byte_limit, check_positive, packet_limit, to_bytes


class Pfifo(Qdisc):
    kind: Literal["pfifo"] = "pfifo"
    module: ClassVar[str] = "sch_fifo"  # built in whenever CONFIG_NET_SCHED is
    limit: int | None = None  # packets

    @field_validator("limit")
    @classmethod
    def _positive(cls, v):
        return check_positive(v)

    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["pfifo", "limit", str(packet_limit(self.limit, buffer, mtu))]


class Bfifo(Qdisc):
    kind: Literal["bfifo"] = "bfifo"
    module: ClassVar[str] = "sch_fifo"
    limit: int | str | None = None  # bytes, or a size string such as "64kb"

    @field_validator("limit")
    @classmethod
    def _size(cls, v):
        return to_bytes(v)

    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["bfifo", "limit", str(byte_limit(self.limit, buffer, mtu))]
