"""Samples that could not be scraped live reach Prometheus afterwards: the run's sample log, backfilled.

A run inside the `vm` guest has no Prometheus to talk to (the guest has no network to the host). So the runner
also writes every batch it publishes to `<run>/samples.jsonl` (SampleLog: one sample per line, with its
timestamp), and the host, once the guest is done, turns the log into OpenMetrics and that into TSDB blocks
with `promtool tsdb create-blocks-from openmetrics`, then moves the blocks into the server's storage folder.

Prometheus (2.39 and later) accepts blocks that overlap others or its head block, and a running server loads
new block folders at its periodic block reload (once a minute), so the series become queryable within about
a minute without a restart; a server started later loads them at start. The series are the ones the live
exporter would have served: same names (through experiments.exporter.families), labels and timestamps.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.samples import Sample
from ccrig.experiments.telemetry.exporter import families

LOG_NAME = "samples.jsonl"
ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


class SampleLog:
    """Records what an Exporter would publish, as it is published (a killed run keeps what it measured).
    Same interface as Exporter, so the runner can publish to either or both."""

    address = None

    def __init__(self, path: Path):
        self.path = Path(path)
        self.file = open(self.path, "a")
        self.info: list[Sample] = []

    def publish(self, samples: list[Sample]) -> None:
        # series the exporter serves without a timestamp (run info) are stamped with each batch's time, so
        # the backfilled run has them wherever it has data
        stamp = next((s.ts for s in samples if s.ts is not None), None)
        for s in list(samples) + ([Sample(i.name, i.labels, i.value, stamp) for i in self.info] if stamp else []):
            if s.ts is None or s.value is None:
                continue
            self.file.write(json.dumps({"name": s.name, "labels": s.labels, "value": s.value, "ts": s.ts}) + "\n")
        self.file.flush()

    def set_info(self, samples: list[Sample]) -> None:
        self.info = list(samples)

    def drain(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        self.file.close()


def read_samples(path: Path) -> list[Sample]:
    """The log's samples; a line cut short by a killed run is dropped."""
    out = []
    with open(path) as f:
        for line in f:
            try:
                d = json.loads(line)
                out.append(Sample(d["name"], d["labels"], float(d["value"]), float(d["ts"])))
            except (ValueError, KeyError, TypeError):
                continue
    return out


def openmetrics(samples: list[Sample]) -> bytes:
    """OpenMetrics text of the samples, one family per metric, each series in time order (the TSDB appender
    rejects a series going back in time; of two samples at one time the later one is kept)."""
    latest: dict[tuple, Sample] = {}
    for s in samples:
        latest[(s.name, tuple(sorted(s.labels.items())), s.ts)] = s
    ordered = sorted(latest.values(), key=lambda s: (s.name, s.ts))

    class Collector:
        def collect(self):
            yield from families(ordered)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return openmetrics_latest(registry)


def backfill(run_dir: Path, storage: Path, commands: Commands | None = None,
             target: dict | None = None) -> list[Path]:
    """Turns run_dir's sample log into TSDB blocks inside storage (a Prometheus --storage.tsdb.path, e.g.
    results/prometheus/data; created if missing). Returns the block folders added. target: the labels a scrape
    adds (job, instance), so backfilled samples join the series a live scrape of the same run made."""
    commands = commands or Commands(None)
    run_dir, storage = Path(run_dir), Path(storage)
    log = run_dir / LOG_NAME
    if not log.is_file():
        raise InputError(f"RUN_DIR: got {str(run_dir)!r}; expected a run directory holding {LOG_NAME}")
    samples = [Sample(s.name, {**s.labels, **(target or {})}, s.value, s.ts) for s in read_samples(log)]
    if not samples:
        return []
    if shutil.which("promtool") is None:
        raise RunError("the `promtool` command is missing; install the Debian package prometheus (`make deps`)")
    storage.mkdir(parents=True, exist_ok=True)
    # promtool writes into a folder beside the storage, so blocks enter it whole by rename (same file system)
    staging = storage.parent / f".backfill-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        text = staging / "samples.om"
        text.write_bytes(openmetrics(samples))
        blocks_dir = staging / "blocks"
        commands.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(text), str(blocks_dir)],
                     timeout=300)
        added = []
        for block in sorted(blocks_dir.iterdir()) if blocks_dir.is_dir() else []:
            if block.is_dir() and ULID.match(block.name):
                target = storage / block.name
                block.rename(target)
                added.append(target)
        return added
    finally:
        shutil.rmtree(staging, ignore_errors=True)
