"""CoDel (Nichols and Jacobson 2012; tc-codel(8)) and FQ-CoDel (RFC 8290; tc-fq_codel(8)).

CoDel drops (or marks) when packets have sat in the queue longer than `target` for at least an `interval`;
fq_codel runs CoDel in each of its hashed flow queues and serves them by deficit round robin.
"""
from __future__ import annotations

from typing import ClassVar, Literal

from ccrig.fields import TimeField
from .base import Bytes, Count, PositiveTime, Qdisc, packet_limit, tc_time


def _aqm_args(q, buffer, mtu) -> list[str]:
    """limit, target, interval, ce_threshold and ecn, shared by both disciplines."""
    args = ["limit", str(packet_limit(q.limit, buffer, mtu))]
    for name in ("target", "interval", "ce_threshold"):
        if getattr(q, name) is not None:
            args += [name, tc_time(getattr(q, name))]
    if q.ecn is not None:
        args.append("ecn" if q.ecn else "noecn")
    return args


class Codel(Qdisc):
    kind: Literal["codel"] = "codel"
    module: ClassVar[str] = "sch_codel"
    kconfig: ClassVar[str] = "NET_SCH_CODEL"
    # tc -s: count, lastcount, ldelay (us), drop_next, maxpacket, dropping go up and down; drop_overlimit,
    # ecn_mark, ... count
    gauges: ClassVar[frozenset[str]] = frozenset({"count", "lastcount", "ldelay", "drop_next", "maxpacket",
                                                  "dropping"})
    limit: Count = None                 # packets (default: the link's buffer)
    target: PositiveTime = None         # acceptable standing queue delay (kernel default 5ms)
    interval: PositiveTime = None       # the window over which the delay must exceed target (100ms)
    ce_threshold: TimeField | None = None
    ecn: bool | None = None             # None: the kernel's default (off for codel, on for fq_codel)



    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["codel", *_aqm_args(self, buffer, mtu)]


class FqCodel(Codel):
    kind: Literal["fq_codel"] = "fq_codel"
    module: ClassVar[str] = "sch_fq_codel"
    kconfig: ClassVar[str] = "NET_SCH_FQ_CODEL"
    # tc -s: maxpacket, memory_used and the new and old flow lists' lengths go up and down; drop_overlimit,
    # ecn_mark, new_flow_count, ... count
    gauges: ClassVar[frozenset[str]] = frozenset({"maxpacket", "memory_used", "new_flows_len", "old_flows_len"})
    flows: Count = None                 # hash buckets (kernel default 1024)
    quantum: Bytes = None               # bytes per round (kernel default 1514)
    memory_limit: Bytes = None



    def qdisc_args(self, buffer, rate_bps, mtu):
        args = ["fq_codel", *_aqm_args(self, buffer, mtu)]
        for name in ("flows", "quantum", "memory_limit"):
            if getattr(self, name) is not None:
                args += [name, str(getattr(self, name))]
        return args
