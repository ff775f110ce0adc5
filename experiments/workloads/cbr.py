"""The cbr workload: UDP packets of `size` at a constant `rate`, evenly spaced, no flow control (udp.py,
sources.py). summary.json's `cbr` has, per flow, the sender's and the receiver's counts, delivered rate, loss,
one-way delay, jitter and interarrival times.

    flows: [{workload: {kind: cbr, rate: 5mbit, size: 1472b}}]
"""
from __future__ import annotations

from typing import Literal

from ccrig.fields import RateField
from ccrig.experiments.workloads.udp import Datagrams


class Cbr(Datagrams):
    """Constant-rate UDP."""
    kind: Literal["cbr"] = "cbr"
    rate: RateField

    pattern = "cbr"
