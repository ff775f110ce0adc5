"""The onoff workload (Keshav 003's background source): UDP at a constant `rate` for `on`, silent for `off`, and
again, starting on; with `periods: exponential` each on and off period is drawn with those means (udp.py,
sources.py). summary.json's `onoff` adds to the UDP entry the on and off periods the receiver saw (runs of
packets, split where a gap is longer than half the shorter period) and the ones the sender scheduled; its
`phases` the flows' means over the intervals it was on throughout and over those it was off throughout (a claim's
quantity reads them with `phase: on | off`).

    flows: [{workload: {kind: onoff, rate: 5mbit, on: 300s, off: 300s}}]      # half of a 10 Mbit/s bottleneck
"""
from __future__ import annotations

import statistics
from typing import Literal

from pydantic import field_validator, model_validator

from ccrig.fields import RateField, TimeField
from ccrig.experiments.workloads import packets as pk
from ccrig.experiments.workloads.udp import Datagrams


class OnOff(Datagrams):
    """UDP in on/off periods, fixed or exponential."""
    kind: Literal["onoff"] = "onoff"
    rate: RateField
    on: TimeField
    off: TimeField
    periods: Literal["fixed", "exponential"] = "fixed"

    pattern = "onoff"

    @model_validator(mode="before")
    @classmethod
    def _yaml_booleans(cls, v):
        # YAML 1.1 (PyYAML) reads the keys `on:` and `off:` as true and false: take them back as written
        if isinstance(v, dict) and (True in v or False in v):
            v = {{True: "on", False: "off"}.get(k, k) if isinstance(k, bool) else k: x for k, x in v.items()}
        return v

    @field_validator("on", "off")
    @classmethod
    def _positive(cls, v):
        if v <= 0:
            raise ValueError('expected a positive time such as "1s" or "300s"')
        return v

    def pattern_argv(self) -> list[str]:
        return ["--on", f"{self.on:g}", "--off", f"{self.off:g}", "--periods", self.periods]

    def on_periods(self, result: dict) -> list[tuple[float, float]]:
        # the sender's own schedule as it ran (its wall clock, the runner's in a namespace testbed): what the paper
        # tabulates apart is the source on and the source off, not the receiver's view of it
        return [(float(a), float(b)) for a, b in result["sender"].get("on", [])]

    def measured(self, result: dict) -> dict:
        out = super().measured(result)
        # a gap longer than half the shorter period ends an on period; within one, gaps are 1/pps plus jitter
        runs = pk.bursts(result["receiver"].packets, min(self.on, self.off) / 2)
        on = [b - a for a, b in runs]
        off = [c - b for (_, b), (c, _) in zip(runs, runs[1:])]
        planned = result["sender"].get("on", [])
        out["periods"] = {
            "on_s": on, "off_s": off, "on_mean_s": statistics.fmean(on) if on else None,
            "off_mean_s": statistics.fmean(off) if off else None,
            "scheduled_on_s": [e - s for s, e in planned],
            "scheduled_off_s": [c - b for (_, b), (c, _) in zip(planned, planned[1:])]}
        return out
