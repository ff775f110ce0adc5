"""The run archive: a self-contained folder per run, written as the run goes so finished points survive.

    <run>/spec.yaml        the spec as resolved (overrides applied)
    <run>/env.json         kernel, sysctls, tool versions, git revision, qdisc trees, ...
    <run>/commands.log     every external command as run (ccrig/commands.py)
    <run>/summary.json     per point: parameters, system and per-flow statistics (rewritten after each point)
    <run>/points/NNN/repR/ intervals.csv, trace.csv, qdisc.csv, and each flow's program output (iperf3-<flow>.json,
                           transfers-<flow>.csv: experiments/workloads/)
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


class RepetitionTables:
    """One repetition's tables, written as it runs: intervals.csv (each flow and the system, each interval) and
    qdisc.csv (the bottleneck's statistics at each boundary); trace.csv (each sender's samples) once the traffic
    is over."""

    def __init__(self, out: Path):
        self.out = out
        self.intervals = CsvTable(out / "intervals.csv", INTERVAL_COLUMNS)
        self.qdisc = CsvTable(out / "qdisc.csv", QDISC_COLUMNS)

    def qdisc_rows(self, rows: list[dict], t: float) -> None:
        for r in rows:
            self.qdisc.add_columns(r)
            self.qdisc.write({"t": t, **r})
        self.qdisc.flush()

    def interval(self, k: int, a: float, b: float, flows, rows: list[dict], system: dict) -> None:
        """Interval k (from a to b seconds): one row per flow (rows in the order of flows), then the system's."""
        for f, row in zip(flows, rows):
            self.intervals.write({"interval": k, "t_start": a, "t_end": b, "flow": f.index, "cc": f.label, **row})
        self.intervals.write({"interval": k, "t_start": a, "t_end": b, "flow": "all", "cc": "", **system})
        self.intervals.flush()

    def close(self) -> None:
        self.intervals.close()
        self.qdisc.close()

    def trace(self, flows, sampler_of) -> None:
        """trace.csv: every sample of each flow's sender socket (sampler_of: the sampler by the flow's key)."""
        table = CsvTable(self.out / "trace.csv", TRACE_COLUMNS)
        for f in flows:
            for t, s in sampler_of[f.sender_key].snapshot(f.sender_key):
                table.write({"t": t, "flow": f.index, "cwnd": s.get("snd_cwnd"), "ssthresh": s.get("snd_ssthresh"),
                             "srtt_s": s.get("rtt_us", 0) / 1e6, "bytes_acked": s.get("bytes_acked"),
                             "bytes_sent": s.get("bytes_sent"), "ca_state": s.get("ca_state"),
                             "total_retrans": s.get("total_retrans")})
        table.close()
