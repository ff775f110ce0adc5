"""CoDel (Nichols and Jacobson 2012; tc-codel(8)) and FQ-CoDel (RFC 8290; tc-fq_codel(8)).

CoDel drops (or marks) when packets have sat in the queue longer than `target` for at least an `interval`;
fq_codel runs CoDel in each of its hashed flow queues and serves them by deficit round robin.
"""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import field_validator

from experiments.fields import TimeField
from .base import Qdisc, check_positive, packet_limit, tc_time, to_bytes


def _aqm_args(q, buffer, mtu) -> list[str]:
    """limit, target, interval, ce_threshold and ecn, shared by both disciplines."""
    args = ["limit", str(packet_limit(q.limit, buffer, mtu))]
    for name in ("target", "interval", "ce_threshold"):
        if getattr(q, name) is not None:
            args += [name, tc_time(getattr(q, name))]
    if q.ecn is not None:
        args.append("ecn" if q.ecn else "noecn")
    return args


def _positive_time(v):
    if v is not None and v <= 0:
        raise ValueError(f"got {v:g}s; expected a positive time such as 5ms")
    return v


class Codel(Qdisc):
    kind: Literal["codel"] = "codel"
    module: ClassVar[str] = "sch_codel"
    limit: int | None = None            # packets (default: the link's buffer)
    target: TimeField | None = None     # acceptable standing queue delay (kernel default 5ms)
    interval: TimeField | None = None   # the window over which the delay must exceed target (100ms)
    ce_threshold: TimeField | None = None
    ecn: bool | None = None             # None: the kernel's default (off for codel, on for fq_codel)

    @field_validator("limit")
    @classmethod
    def _limit(cls, v):
        return check_positive(v)

    @field_validator("target", "interval")
    @classmethod
    def _time(cls, v):
        return _positive_time(v)

    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["codel", *_aqm_args(self, buffer, mtu)]


class FqCodel(Codel):
    kind: Literal["fq_codel"] = "fq_codel"
    module: ClassVar[str] = "sch_fq_codel"
    flows: int | None = None            # hash buckets (kernel default 1024)
    quantum: int | str | None = None    # bytes per round (kernel default 1514)
    memory_limit: int | str | None = None

    @field_validator("flows")
    @classmethod
    def _flows(cls, v):
        return check_positive(v)

    @field_validator("quantum", "memory_limit")
    @classmethod
    def _bytes(cls, v):
        return to_bytes(v)

    def qdisc_args(self, buffer, rate_bps, mtu):
        args = ["fq_codel", *_aqm_args(self, buffer, mtu)]
        for name in ("flows", "quantum", "memory_limit"):
            if getattr(self, name) is not None:
                args += [name, str(getattr(self, name))]
        return args
