"""`make soak N=...`: N short runs back to back (2 flows, 3 s), a tenth of them killed with
SIGKILL at a random moment and followed by `ccrig clean`; after each run, what it left: namespaces, root-namespace
qdiscs, processes, registered congestion controls, open files of ccrig processes, duplicate Prometheus series (if
a local Prometheus is up), and any new kernel warning. Writes results/bench/soak.json. Run as root.

Not part of `make test` or `make bench`: it takes about 7 s a run. The clean after a kill is given the killed
run's prefix (ccrig-PID-): a full `ccrig clean` would also sweep up runs of other programs on this machine
(a test suite's in-process runners) that it cannot tell alive.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CCRIG = [sys.executable, "-c", "from ccrig.experiments.cli.app import main; main()"]
OUT = ROOT / "results/bench/soak.json"
PROMETHEUS_DIR = ROOT / "results/prometheus"
SPEC = {"name": "soak", "testbed": "netns",
        "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt", "qdisc": "pfifo"}},
        "flows": [{"cc": "reno"}, {"cc": "cubic"}], "duration": "3s", "interval": "1s", "warmup": 1}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        r = subprocess.run(["pgrep", "-P", str(todo.pop())], capture_output=True, text=True)
        kids = {int(x) for x in r.stdout.split()}
        out |= kids
        todo += kids
    return out


def _root_qdiscs() -> set[str]:
    return set(subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout.splitlines())


def _ccs() -> set[str]:
    return set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split())


def _dmesg() -> list[str]:
    r = subprocess.run(["dmesg", "--level=emerg,alert,crit,err,warn"], capture_output=True, text=True)
    return r.stdout.splitlines()


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _prometheus_url() -> str | None:
    from ccrig.experiments.telemetry.prometheus_server import PrometheusServer
    return PrometheusServer(PROMETHEUS_DIR).url


def _duplicates(url: str, run: str) -> int:
    """Series of this run that Prometheus holds more than once (the same labels from two targets or jobs)."""
    from ccrig.experiments.telemetry.prometheus_server import query
    promql = (f'count by (run, point, rep, flow) (last_over_time(ccrig_flow_goodput_bytes_per_second'
              f'{{run="{run}"}}[10m])) > 1')
    try:
        return len(query(url, promql))
    except Exception:
        return -1


def one(i: int, kill_at: float | None, work: Path, spec: Path, url: str | None) -> dict:
    qdiscs, ccs, dmesg = _root_qdiscs(), _ccs(), len(_dmesg())
    argv = [*CCRIG, "run", str(spec), "--out", str(work / "runs"), "--no-progress"]
    argv += ["--prometheus-dir", str(PROMETHEUS_DIR)] if url else ["--prometheus", "off"]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()   # the run's processes, looked at while it goes
    fds = 0
    while p.poll() is None:
        if kill_at is not None and time.monotonic() - t0 >= kill_at:
            seen |= _descendants(p.pid)
            p.kill()
            break
        seen |= _descendants(p.pid)
        fds = max(fds, _fds(p.pid))
        time.sleep(0.2)
    out, err = p.communicate()
    wall = time.monotonic() - t0
    prefix = f"ccrig-{p.pid}-"
    clean = None
    if kill_at is not None:
        c = subprocess.run([*CCRIG, "clean", "--prefix", prefix], cwd=ROOT, capture_output=True, text=True)
        clean = {"rc": c.returncode, "said": c.stdout.strip().splitlines()}
    time.sleep(0.2)
    left = {
        "namespaces": sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix))
        if os.path.isdir("/run/netns") else [],
        "qdiscs": sorted(_root_qdiscs() - qdiscs),
        "processes": sorted(f"{q} {_cmdline(q)[:80]}" for q in seen if _cmdline(q)),
        # a variant is registered under its run's prefix; others' (a test suite's at the same time) are not ours
        "ccs": sorted(c for c in _ccs() - ccs if str(p.pid) in c),
        "open_files": sum(_fds(q) for q in seen if _cmdline(q)),
    }
    runs = sorted((work / "runs").glob(f"*-{p.pid}"))
    dup = _duplicates(url, runs[0].name) if url and runs and kill_at is None else None
    warnings = _dmesg()[dmesg:]
    rec = {"i": i, "pid": p.pid, "killed_at_s": kill_at, "rc": p.returncode, "wall_s": round(wall, 2),
           "max_fds": fds, "left": {k: v for k, v in left.items() if v}, "prometheus_duplicates": dup,
           "dmesg": warnings, "clean": clean}
    if kill_at is None and p.returncode != 0:
        rec["stderr"] = err.strip().splitlines()[-3:]
    return rec


def main() -> int:
    n = int(os.environ.get("N", sys.argv[1] if len(sys.argv) > 1 else 10))
    rng = random.Random(int(os.environ.get("SEED", "16")))
    killed = set(rng.sample(range(n), max(1, n // 10))) if n >= 2 else set()
    url = _prometheus_url()
    records = []
    with tempfile.TemporaryDirectory(prefix="ccrig-soak-") as d:
        work = Path(d)
        spec = work / "soak.yaml"
        spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
        for i in range(n):
            kill_at = round(rng.uniform(0.3, 7.0), 2) if i in killed else None
            rec = one(i, kill_at, work, spec, url)
            records.append(rec)
            bad = rec["left"] or rec["dmesg"] or (kill_at is None and rec["rc"] != 0) or rec["prometheus_duplicates"]
            print(f"run {i + 1}/{n} pid {rec['pid']}: rc {rec['rc']} in {rec['wall_s']} s"
                  + (f", SIGKILL at {kill_at} s then clean" if kill_at is not None else "")
                  + (f"  LEFT/WARN: {rec['left']} {rec['dmesg']}" if bad else ""), flush=True)
            for r in work.glob("runs/*"):   # the archives are not what is soaked
                subprocess.run(["rm", "-rf", str(r)])
            summary = _summary(n, url, records)   # after each run: a soak cut short keeps its record
            OUT.parent.mkdir(parents=True, exist_ok=True)
            OUT.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "records"}, indent=2))
    print(f"soak: {OUT}")
    return 0 if not (summary["runs_with_leftovers"] or summary["failed_runs"]) else 1


def _summary(n: int, url: str | None, records: list[dict]) -> dict:
    finished = [r for r in records if r["killed_at_s"] is None]
    return {
        "runs_planned": n, "runs": len(records), "killed": sum(1 for r in records if r["killed_at_s"] is not None),
        "prometheus": url,
        "failed_runs": sum(1 for r in finished if r["rc"] != 0),
        "runs_with_leftovers": sum(1 for r in records if r["left"]),
        "leftovers": {k: sum(len(r["left"].get(k, [])) if k != "open_files" else r["left"].get(k, 0)
                             for r in records) for k in ("namespaces", "qdiscs", "processes", "ccs", "open_files")},
        "prometheus_duplicates": sum(r["prometheus_duplicates"] or 0 for r in records) if url else None,
        "dmesg_warnings": [w for r in records for w in r["dmesg"]],
        "wall_s": {"mean": round(sum(r["wall_s"] for r in finished) / max(1, len(finished)), 2),
                   "max": max((r["wall_s"] for r in finished), default=0)},
        "records": records,
    }


if __name__ == "__main__":
    sys.exit(main())
