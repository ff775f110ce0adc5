"""RED, Random Early Detection (Floyd and Jacobson 1993; tc-red(8)), with optional ECN marking.

RED keeps an exponentially weighted average of the queue in bytes. Below `min` it never drops; between `min`
and `max` it drops (or, with `ecn`, marks ECN-capable packets) with a probability that climbs linearly to
`probability`; above `max` it drops every arrival; `limit` is the hard cap on the real queue.

Unset parameters are derived as tc-red(8) recommends, from the link:
    limit  = the link's buffer in bytes (packets x wire size)
    max    = limit / 4        min = max / 3, but more than one avpkt (tc's EWMA has no solution below that)
    avpkt  = a full-size wire packet (bulk TCP sends full-size segments)
    burst  = (2 min + max) / (3 avpkt)     -- how many packets the average lets through before reacting
    bandwidth = the link's rate (only used to decay the average after idle time)
"""
from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import field_validator, model_validator

from ccrig.errors import field_error
from ccrig.fields import RateField
from .base import Bytes, Count, Qdisc, byte_limit, wire_bytes


class Red(Qdisc):
    kind: Literal["red"] = "red"
    module: ClassVar[str] = "sch_red"
    kconfig: ClassVar[str] = "NET_SCH_RED"
    # tc -s: early (early drops), marked (ECN marks), pdrop (drops over max or limit), other: all count up
    limit: Bytes = None              # bytes: the hard cap on the real queue
    min: Bytes = None                # bytes of average queue where early drops start
    max: Bytes = None                # bytes of average queue where the drop probability is `probability`
    avpkt: Bytes = None              # bytes
    burst: Count = None              # packets
    probability: float = 0.02
    bandwidth: RateField | None = None
    ecn: bool = False
    harddrop: bool = False
    adaptive: bool = False



    @field_validator("probability")
    @classmethod
    def _probability(cls, v):
        if not 0 < v <= 1:
            raise ValueError(f"got {v!r}; expected a number above 0 and at most 1, e.g. 0.02")
        return v

    @model_validator(mode="after")
    def _thresholds(self):
        # what can be checked without the link; the rest is checked in thresholds() once the buffer is known
        if self.min is not None and self.max is not None and self.min >= self.max:
            raise ValueError(f"min: got {self.min}; expected less than max ({self.max} bytes)")
        if self.max is not None and self.limit is not None and self.max >= self.limit:
            raise ValueError(f"max: got {self.max}; expected less than limit ({self.limit} bytes)")
        return self

    def thresholds(self, buffer, mtu: int) -> dict[str, int]:
        """limit, min, max, avpkt (bytes) and burst (packets) as they will be installed on this link."""
        limit = byte_limit(self.limit, buffer, mtu)
        avpkt = self.avpkt or wire_bytes(mtu)
        qmax = self.max if self.max is not None else limit // 4
        # tc-red(8) computes the EWMA weight W from burst + 1 - min/avpkt <= (1 - (1 - W)^burst) / W, whose right
        # side never reaches burst: with min at or below one avpkt there is no W ("failed to calculate EWMA
        # constant", seen with a 10-packet buffer's derived min of 1261 bytes)
        qmin = self.min if self.min is not None else max(qmax // 3, avpkt + 1)
        if qmin <= avpkt:
            raise field_error("qdisc.min", qmin, f"more than avpkt ({avpkt} bytes): tc-red's averaging weight has "
                                                  f"no solution below one packet")
        if qmin >= qmax:
            raise field_error("qdisc.min", qmin, f"less than max ({qmax} bytes)")
        if qmax >= limit:
            raise field_error("qdisc.max", qmax, f"less than limit ({limit} bytes)")
        burst = self.burst if self.burst is not None else max(1, math.ceil((2 * qmin + qmax) / (3 * avpkt)))
        # tc's EWMA needs burst + 1 - min/avpkt >= 1, i.e. the burst must cover min
        if burst < qmin / avpkt:
            raise field_error("qdisc.burst", burst, f"at least min/avpkt = {math.ceil(qmin / avpkt)} packets")
        return {"limit": limit, "min": qmin, "max": qmax, "avpkt": avpkt, "burst": burst}

    def qdisc_args(self, buffer, rate_bps, mtu):
        t = self.thresholds(buffer, mtu)
        args = ["red", "limit", str(t["limit"]), "min", str(t["min"]), "max", str(t["max"]),
                "avpkt", str(t["avpkt"]), "burst", str(t["burst"]), "probability", f"{self.probability:g}"]
        bps = self.bandwidth.bps(wire_bytes(mtu)) if self.bandwidth is not None else rate_bps
        if bps:
            args += ["bandwidth", f"{round(bps)}bit"]
        args += [flag for flag in ("ecn", "harddrop", "adaptive") if getattr(self, flag)]
        return args
