"""Cumulative counters (a queue's packets sent and dropped, a drop point's packets dropped and passed) read at
irregular times, taken to the intervals' boundaries.

    c = Counters(readings)        # [(seconds since t0, {name: total so far, ...}), ...] in the order read
    c.at("dropped", 12.0)         # the total at 12 s: linear between the readings around it, held past the ends
    c.between("dropped", 11, 12)  # what was counted in [11, 12]

Why: a repetition reads its counters once an interval, but on a loaded machine its loop reads them late, later
and later (study 001 with twelve pairs side by side, 2026-12-07: 35 of 60 boundaries read by the time the traffic
ended, the other 25 at once after it). Taken as read, one interval's delta then held two or three intervals'
drops and the last ones none: the measured window's loss read 0. Each reading's own time puts every count back
where it happened, to within the gap between two readings.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Mapping, Sequence


class Counters:
    def __init__(self, readings: Sequence[tuple[float, Mapping[str, float]]]):
        pairs = sorted(readings, key=lambda r: r[0])
        self.times = [t for t, _ in pairs]
        self.values = [v for _, v in pairs]

    def at(self, name: str, t: float) -> float:
        """The counter's total at t; 0 without readings."""
        if not self.times:
            return 0.0
        j = bisect_right(self.times, t)
        if j == 0:
            return float(self.values[0].get(name, 0))
        if j == len(self.times):
            return float(self.values[-1].get(name, 0))
        t0, t1 = self.times[j - 1], self.times[j]
        v0, v1 = float(self.values[j - 1].get(name, 0)), float(self.values[j].get(name, 0))
        return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)

    def between(self, name: str, a: float, b: float) -> float:
        return self.at(name, b) - self.at(name, a)

    def nearest(self, t: float) -> Mapping[str, float]:
        """The reading closest in time to t (for a level, such as a queue's backlog, that no sum describes)."""
        j = min(range(len(self.times)), key=lambda i: abs(self.times[i] - t))
        return self.values[j]

    def gap(self) -> float:
        """The longest time between two readings: how far a count may have moved from where it happened."""
        return max((b - a for a, b in zip(self.times, self.times[1:])), default=0.0)
