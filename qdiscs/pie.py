"""PIE, Proportional Integral controller Enhanced (RFC 8033; tc-pie(8)): every `tupdate` the drop
probability moves by alpha times the delay's distance from `target` plus beta times its change."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import field_validator

from .base import Count, PositiveTime, Qdisc, packet_limit, tc_time


class Pie(Qdisc):
    kind: Literal["pie"] = "pie"
    module: ClassVar[str] = "sch_pie"
    kconfig: ClassVar[str] = "NET_SCH_PIE"
    # tc -s: prob (0..1), delay (us), avg_dq_rate, maxq go up and down; pkts_in, dropped, overlimit, ecn_mark count
    gauges: ClassVar[frozenset[str]] = frozenset({"prob", "delay", "avg_dq_rate", "maxq"})
    limit: Count = None                # packets (default: the link's buffer)
    target: PositiveTime = None        # target queueing delay (kernel default 15ms)
    tupdate: PositiveTime = None       # probability update interval (kernel default 15ms)
    alpha: int | None = None           # 0..32, in units of 1/8 (kernel default 2)
    beta: int | None = None            # 0..32, in units of 1/8 (kernel default 20)
    ecn: bool = False
    bytemode: bool = False
    dq_rate_estimator: bool = False


    @field_validator("alpha", "beta")
    @classmethod
    def _gain(cls, v):
        if v is not None and not 0 <= v <= 32:
            raise ValueError(f"got {v!r}; expected 0 to 32")
        return v

    def qdisc_args(self, buffer, rate_bps, mtu):
        args = ["pie", "limit", str(packet_limit(self.limit, buffer, mtu))]
        for name in ("target", "tupdate"):
            if getattr(self, name) is not None:
                args += [name, tc_time(getattr(self, name))]
        for name in ("alpha", "beta"):
            if getattr(self, name) is not None:
                args += [name, str(getattr(self, name))]
        args += [flag for flag in ("ecn", "bytemode", "dq_rate_estimator") if getattr(self, flag)]
        return args
