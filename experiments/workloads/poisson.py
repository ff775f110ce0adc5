"""The poisson workload (Keshav 003's Poisson source): UDP packets of `size` with exponentially distributed gaps
at a mean `rate`, no flow control (udp.py, sources.py). summary.json's `poisson` has, per flow, the sender's and
the receiver's counts, delivered rate, loss, one-way delay, jitter, and the interarrival times' mean and
coefficient of variation at the receiver (1 for a Poisson stream that no queue has smoothed).

    flows: [{workload: {kind: poisson, rate: 1000pps, size: 200b}}]
"""
from __future__ import annotations

from typing import Literal

from ccrig.fields import RateField
from ccrig.experiments.workloads.udp import Datagrams


class Poisson(Datagrams):
    """UDP with exponential gaps at a mean rate."""
    kind: Literal["poisson"] = "poisson"
    rate: RateField

    pattern = "poisson"
