"""The run archive: a self-contained folder per run, written as the run goes so finished points survive.

    <run>/spec.yaml        the spec as resolved (overrides applied)
    <run>/env.json         kernel, sysctls, tool versions, git revision, qdisc trees, ...
    <run>/commands.log     every external command as run (experiments/commands.py)
    <run>/summary.json     per point: parameters, system and per-flow statistics (rewritten after each point)
    <run>/points/NNN/repR/ intervals.csv, trace.csv, qdisc.csv, iperf3-<flow>.json
"""
from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import yaml

INTERVAL_COLUMNS = ["interval", "t_start", "t_end", "flow", "cc", "goodput_bps", "throughput_bps", "eee", "uar",
                    "loss", "retrans_rate", "rtt_s", "min_rtt_s", "cwnd", "jain"]
TRACE_COLUMNS = ["t", "flow", "cwnd", "ssthresh", "srtt_s", "bytes_acked", "bytes_sent", "ca_state", "total_retrans"]
QDISC_COLUMNS = ["t", "node", "dev", "class", "kind", "handle", "parent", "sent_packets", "sent_bytes", "dropped",
                 "overlimits", "requeues", "backlog_packets", "backlog_bytes"]


def new_run_dir(root: Path, experiment: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = root / f"{experiment}-{stamp}-{os.getpid()}"
    path.mkdir(parents=True)
    return path


class CsvTable:
    """A CSV file written row by row and flushed, so a killed run keeps what it measured."""

    def __init__(self, path: Path, columns: list[str]):
        self.columns = list(columns)
        self.file = open(path, "w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=self.columns, extrasaction="ignore")
        self.writer.writeheader()

    def add_columns(self, names) -> None:
        """Discipline-specific counters appear with the first row that has them; rewrite the header then."""
        new = [n for n in names if n not in self.columns]
        if not new:
            return
        self.columns += new
        self.file.flush()
        path = Path(self.file.name)
        rows = list(csv.DictReader(open(path)))
        self.file.close()
        self.file = open(path, "w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=self.columns, extrasaction="ignore")
        self.writer.writeheader()
        self.writer.writerows(rows)

    def write(self, row: dict) -> None:
        self.writer.writerow({k: _fmt(v) for k, v in row.items()})

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def _fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


class RunArchive:
    def __init__(self, path: Path):
        self.path = path
        (path / "points").mkdir(exist_ok=True)

    @property
    def commands_log(self) -> Path:
        return self.path / "commands.log"

    def write_spec(self, raw: dict) -> None:
        (self.path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))

    def write_json(self, name: str, data) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        tmp.rename(self.path / name)  # atomically: a reader or a kill never sees half a summary

    def rep_dir(self, point: int, rep: int) -> Path:
        d = self.path / "points" / f"{point:03d}" / f"rep{rep}"
        d.mkdir(parents=True, exist_ok=True)
        return d
