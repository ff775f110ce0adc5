"""Prometheus exposition text of samples, as the exporter serves it, for tests that check it (promtool, types)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from ccrig.experiments.telemetry.exporter import HELP, families
from ccrig.topologies.pause.emulated import PAUSE_HELP


def render(samples) -> str:
    """The exposition text of samples, with the pause series' types merged into the exporter's table."""
    class Collector:
        def collect(self):
            yield from families(samples)
    added = {k: v for k, v in PAUSE_HELP.items() if k not in HELP}
    HELP.update(added)
    try:
        reg = CollectorRegistry()
        reg.register(Collector())
        return generate_latest(reg).decode()
    finally:
        for k in added:
            HELP.pop(k)
