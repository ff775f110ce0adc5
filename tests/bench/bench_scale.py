"""Scale and fidelity: a flows x rate grid of bulk cubic flows through the default dumbbell on netns,
each a whole `ccrig run` — its wall time against the spec's duration, the setup time before the first interval,
the machine's sampler's CPU (one process for every namespace), goodput / T_max and the fidelity monitor's verdict.

Wall time = start-up (Python, preflight, the congestion controls) + setup (above) + the duration + the end
(senders finishing, trace.csv, teardown).

Goals: 100 bulk flows at 100 Mbit/s for 20 s finish within 40 s of wall time; the sampler uses < 5 % of one core
per 100 flows at 50 Hz; a CPU-limited point (one flow at several Gbit/s here) is labelled testbed-limited and
the default spec ok; SIGINT during a 100-flow run's set-up ends it within 5 s, leaving nothing.

Run as root: `make bench BENCH=scale` -> results/bench/scale.json. The grid is long (about a minute per cell at
20 s); CCRIG_BENCH_SCALE="FLOWSxRATE,..." (e.g. "100x100mbit,1x5gbit") runs only those cells.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CCRIG = [str(Path(sys.executable).with_name("ccrig"))]   # the venv's console script
DURATION_S = 20
FLOWS = [1, 10, 30, 100, 300]
RATES = ["10mbit", "100mbit", "1gbit"]
# beyond the grid: the fidelity monitor's two ends, a CPU-limited single flow and the default spec
EXTRA = [(1, "5gbit")]
GOAL_WALL_S = 40.0          # 100 flows, 100 Mbit/s, 20 s
GOAL_SAMPLER_CORE = 0.05    # per 100 flows at 50 Hz


# the dumbbell's address plan has room for 254 host pairs: more flows share pairs
MAX_PAIRS = 150


def _spec(flows: int, rate: str) -> str:
    pairs = f"  pairs: {MAX_PAIRS}\n" if flows > MAX_PAIRS else ""
    return (f"name: scale-{flows}x{rate}\ntestbed: netns\ntopology:\n  name: dumbbell\n{pairs}  bottleneck:\n"
            f"    rate: {rate}\n    buffer: 100pkt\n    qdisc: pfifo\nflows:\n  - cc: cubic\n    count: {flows}\n"
            f"duration: {DURATION_S}s\ninterval: 1s\nwarmup: 1\n")


def run_cell(path: Path, out: Path, label: str, duration_s: float = DURATION_S) -> dict:
    t = time.monotonic()
    p = subprocess.run([*CCRIG, "run", str(path), "--out", str(out), "--prometheus", "off", "--no-progress",
                        "--json"], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    wall = time.monotonic() - t
    cell: dict = {"cell": label, "wall_s": round(wall, 2), "exit": p.returncode}
    if p.returncode != 0:
        cell["error"] = p.stderr.strip()[-500:]
        return cell
    summary = json.loads(p.stdout)
    run_dir = out / summary["run"]
    point = summary["points"][0]
    fid = point["repetitions"][0].get("fidelity", {})
    # setup: from the run directory's creation to t0 (testbed up, servers, the sampler polling), t0 being the
    # first interval's sample time less one interval
    setup = None
    with open(run_dir / "samples.jsonl") as f:
        for line in f:
            rec = json.loads(line)
            if rec["labels"].get("rep") is not None:
                setup = rec["ts"] - summary["interval_s"] - (run_dir / "spec.yaml").stat().st_mtime
                break
    cell.update({"duration_s": duration_s, "overhead_s": round(wall - duration_s, 2),
                 "setup_s": round(setup, 2) if setup is not None else None,
                 "goodput_of_t_max": fid.get("goodput_of_t_max"), "verdict": point["fidelity"]["verdict"],
                 "reasons": point["fidelity"]["reasons"], "sampler_cpu_cores": fid.get("sampler_cpu_cores"),
                 "sampler_late_share": fid.get("sampler_late_share"), "cpu_busy": fid.get("cpu_busy")})
    return cell


def sigint_in_setup(path: Path, out: Path, namespaces: int, after_s: float = 1.0) -> dict:
    """SIGINT after_s seconds after the run's namespaces all exist (its servers and sampler starting): seconds
    to exit, and what it left (its namespaces, any process naming its prefix)."""
    p = subprocess.Popen([*CCRIG, "run", str(path), "--out", str(out), "--prometheus", "off", "--no-progress"],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         # a bench started as a background job passes SIGINT on ignored: the run must answer it
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    prefix = f"ccrig-{p.pid}-"
    deadline = time.monotonic() + 120
    while (sum(1 for n in _namespaces() if n.startswith(prefix)) < namespaces and time.monotonic() < deadline
           and p.poll() is None):
        time.sleep(0.005)
    time.sleep(after_s)
    seen = sum(1 for n in _namespaces() if n.startswith(prefix))
    log = "".join(f.read_text() for f in out.glob("*/commands.log"))
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=300)
    took = time.monotonic() - t
    left = [n for n in _namespaces() if n.startswith(prefix)]
    procs = subprocess.run(["pgrep", "-f", prefix], capture_output=True, text=True).stdout.split()
    return {"namespaces_when_signalled": seen, "clients_started": "--client" in log, "exit": p.returncode, "exit_s_after_sigint": round(took, 2),
            "left_namespaces": len(left), "left_processes": len(procs), "stderr_tail": err.strip()[-200:]}


def _namespaces() -> list[str]:
    try:
        return os.listdir("/run/netns")
    except FileNotFoundError:
        return []


def _cells() -> list[tuple[int, str]]:
    only = os.environ.get("CCRIG_BENCH_SCALE")
    if only:
        return [(int(c.split("x")[0]), c.split("x")[1]) for c in only.split(",")]
    return [(f, r) for f in FLOWS for r in RATES] + EXTRA


def run() -> dict:
    cells = []
    with tempfile.TemporaryDirectory(prefix="ccrig-bench-scale-") as tmp:
        out = Path(tmp) / "runs"
        for flows, rate in _cells():
            spec = Path(tmp) / f"{flows}x{rate}.yaml"
            spec.write_text(_spec(flows, rate))
            cells.append({"flows": flows, "rate": rate, **run_cell(spec, out, f"{flows}x{rate}")})
            print(json.dumps(cells[-1]), flush=True)
        default = run_cell(ROOT / "experiments" / "specs" / "default.yaml", out, "default")
        spec = Path(tmp) / "sigint.yaml"
        spec.write_text(_spec(100, "100mbit"))
        sigint = sigint_in_setup(spec, out / "sigint", 2 * 100 + 2)   # senders, receivers, two routers
    # the sampler's CPU at 100 flows as measured (a smaller run scaled up would count its fixed cost per poll
    # as if it grew with the flows)
    at100 = [c["sampler_cpu_cores"] for c in cells if c["flows"] == 100 and c.get("sampler_cpu_cores") is not None]
    target = next((c for c in cells if c["flows"] == 100 and c["rate"] == "100mbit"), None)
    return {"cells": cells, "default": default, "sigint_in_100_flow_setup": sigint,
            "goals": {"wall_100x100mbit_s": target and target["wall_s"], "wall_goal_s": GOAL_WALL_S,
                      "sampler_cores_at_100_flows": max(at100) if at100 else None,
                      "sampler_goal_cores": GOAL_SAMPLER_CORE}}
