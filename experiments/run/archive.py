"""The run archive: a self-contained folder per run, written as the run goes so finished points survive.

    <run>/spec.yaml        the spec as resolved (overrides applied)
    <run>/env.json         kernel, sysctls, tool versions, git revision, qdisc trees, ...
    <run>/commands.log     every external command as run (ccrig/commands.py)
    <run>/summary.json     per point: parameters, system and per-flow statistics (rewritten after each point)
    <run>/points/NNN/repR/ intervals.csv, trace.csv, qdisc.csv, and each flow's program output (iperf3-<flow>.json,
                           transfers-<flow>.csv: experiments/workloads/); repetition.json, the repetition's
                           summary entry, written last: its presence is what says the repetition is complete
                           (`ccrig run SPEC --resume RUN_DIR` runs only the pairs without it)
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from ccrig.analysis import metric_table
from ccrig.errors import InputError

REPETITION_RECORD = "repetition.json"

# every metric's column (analysis/metric_table.py), then whether the interval was computed from a late sampler
INTERVAL_COLUMNS = ["interval", "t_start", "t_end", "flow", "cc", *[m.column for m in metric_table.TABLE],
                    "degraded"]
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

    def rep_dir(self, point: int, rep: int, variant: str = "") -> Path:
        """points/NNN/repR, or points/NNN/<variant>/repR for a variant of the point (PAUSE's baseline)."""
        d = self.path / "points" / f"{point:03d}" / variant / f"rep{rep}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    # --- repetitions as the unit of completion, and resuming -------------------------------------
    def write_repetition(self, point: int, rep: int, entry: dict, variant: str = "") -> None:
        """The repetition's summary entry into its folder, atomically and last: it marks the pair complete."""
        d = self.rep_dir(point, rep, variant)
        tmp = d / f".{REPETITION_RECORD}.tmp"
        tmp.write_text(json.dumps(entry, indent=1, default=str) + "\n")
        tmp.rename(d / REPETITION_RECORD)

    def repetitions_done(self) -> dict[tuple, dict]:
        """(point, repetition) or (point, repetition, variant) -> its entry, for every complete pair."""
        out = {}
        points = self.path / "points"
        for rec in sorted(points.glob(f"[0-9][0-9][0-9]/rep*/{REPETITION_RECORD}")) + \
                sorted(points.glob(f"[0-9][0-9][0-9]/*/rep*/{REPETITION_RECORD}")):
            inner = rec.parent.relative_to(points).parts
            try:
                key = (int(inner[0]), int(inner[-1][3:])) + ((inner[1],) if len(inner) == 3 else ())
                out[key] = json.loads(rec.read_text())
            except (ValueError, json.JSONDecodeError):
                continue   # cut short by a kill: not complete
        return out

    def clear_repetition(self, point: int, rep: int, variant: str = "") -> None:
        """What an interrupted attempt at the pair left (its tables, program output), before it runs again."""
        d = self.path / "points" / f"{point:03d}" / variant / f"rep{rep}"
        if d.is_dir() and not (d / REPETITION_RECORD).is_file():
            shutil.rmtree(d)

    def drop_samples(self, log_name: str, pairs: set[tuple]) -> int:
        """Removes from the sample log the samples of the given (point, repetition) pairs (an interrupted
        attempt's, run again on resume): one series per flow per repetition, the rerun's. Returns how many."""
        path = self.path / log_name
        if not path.is_file() or not pairs:
            return 0
        keep, dropped = [], 0
        want = {(str(p[0]), str(p[1])) for p in pairs}
        for line in path.read_text().splitlines():
            try:
                labels = json.loads(line).get("labels", {})
            except ValueError:
                dropped += 1   # a line cut short by the kill
                continue
            if (labels.get("point"), labels.get("rep")) in want:
                dropped += 1
                continue
            keep.append(line)
        tmp = path.with_name(f".{log_name}.tmp")
        tmp.write_text("".join(f"{line}\n" for line in keep))
        tmp.rename(path)
        return dropped


def open_to_resume(run_dir: Path, raw: dict) -> tuple[RunArchive, dict, dict]:
    """An archived run to continue: (archive, its summary.json, its env.json). InputError unless it is a
    run directory whose spec.yaml is the spec given (after --set), field for field."""
    run_dir = Path(run_dir)
    if not (run_dir / "spec.yaml").is_file() or not (run_dir / "summary.json").is_file():
        raise InputError(f"--resume: got {str(run_dir)!r}; expected a run directory holding spec.yaml and "
                         f"summary.json (results/runs/...)")
    archived = yaml.safe_load((run_dir / "spec.yaml").read_text())
    # the resolved spec as it would be archived: compared through the same YAML round trip
    given = yaml.safe_load(yaml.safe_dump(raw, sort_keys=False))
    if archived != given:
        diff = sorted(k for k in set(archived or {}) | set(given) if (archived or {}).get(k) != given.get(k))
        raise InputError(f"--resume: the spec differs from the one archived in {run_dir / 'spec.yaml'} (fields "
                         f"{', '.join(diff)}); expected the same spec and --set values as the run being resumed")
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        env = json.loads((run_dir / "env.json").read_text()) if (run_dir / "env.json").is_file() else {}
    except json.JSONDecodeError as e:
        raise InputError(f"--resume: {run_dir}: summary.json or env.json is not valid JSON ({e})") from None
    return RunArchive(run_dir), summary, env


class RepetitionTables:
    """One repetition's tables, written as it runs: intervals.csv (each flow and the system, each interval) and
    qdisc.csv (the queues' statistics at each boundary, `t` when read, and once after the traffic); trace.csv
    (each sender's samples) once the traffic is over."""

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

    def rewrite_intervals(self, flows, bounds: list[tuple], rows_by_flow: dict, system_rows: list[dict]) -> None:
        """intervals.csv again, once the rows were settled from every sample (measurement._settle), with the
        columns the live file had."""
        table = CsvTable(self.out / "intervals.csv", self.intervals.columns)
        self.intervals = table
        for i, (a, b, *_) in enumerate(bounds):
            self.interval(i, a, b, flows, [rows_by_flow[f.index][i] for f in flows], system_rows[i])
        table.close()

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


MIN_FREE = 16 * 2**20   # bytes: a short run's archive is well under it; less means the disk is full in all but name


def archive_room(out_root: Path) -> None:
    """Raises InputError unless a run directory can be made under out_root and there is room to write it. Makes nothing: the nearest folder that exists is tried with a file made and removed at once."""
    where = out_root
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
        st = os.statvfs(where)
    except OSError as e:
        raise InputError(f"--out {out_root}: cannot write a run directory there ({e.strerror})") from None
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE:
        raise InputError(f"--out {out_root}: only {free / 2**20:.1f} MiB free there; a run needs at least "
                         f"{MIN_FREE // 2**20} MiB")
