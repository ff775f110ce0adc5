"""A sample: one value of one Prometheus series at one time, as every part of a run hands it to the exporter and
the archive (experiments/telemetry/exporter.py turns them into metric families)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Sample:
    name: str            # without the ccrig_ prefix, e.g. flow_goodput_bytes_per_second
    labels: dict
    value: float
    ts: float | None = None  # unix seconds; None = scrape time
