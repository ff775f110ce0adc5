"""Drop-tail: pfifo counts packets, bfifo counts bytes (tc-pfifo(8)).

The buffer comes from the link (`buffer: 100pkt` or `buffer: 64kb`) unless `limit` is given here. Packet limits
mean wire packets only because every emulated interface sends wire-sized packets (see topologies/testbeds/netns.py).
"""
from __future__ import annotations

from typing import ClassVar, Literal

from .base import Bytes, Count, Qdisc, byte_limit, packet_limit


class Pfifo(Qdisc):
    kind: Literal["pfifo"] = "pfifo"
    module: ClassVar[str] = "sch_fifo"  # built in whenever CONFIG_NET_SCHED is
    kconfig: ClassVar[str] = "NET_SCHED"
    limit: Count = None  # packets


    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["pfifo", "limit", str(packet_limit(self.limit, buffer, mtu))]


class Bfifo(Qdisc):
    kind: Literal["bfifo"] = "bfifo"
    module: ClassVar[str] = "sch_fifo"
    kconfig: ClassVar[str] = "NET_SCHED"
    limit: Bytes = None  # bytes, or a size string such as "64kb"


    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["bfifo", "limit", str(byte_limit(self.limit, buffer, mtu))]
