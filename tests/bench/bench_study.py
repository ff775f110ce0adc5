"""Pairs side by side (`ccrig run --jobs`, experiments/run/engine.py): the same spec's repetitions one at a time
and side by side, at 10, 100 and 300 Mbit/s (two cubic and two reno flows through the default dumbbell).

Per rate and mode: the wall time, the study throughput (experiment-seconds measured per wall second: repetitions
x duration / wall), each repetition's fidelity verdict, and the system goodput with its interval over the
repetitions. `agree` says whether the side-by-side run's goodput interval overlaps the one-at-a-time run's
(interference that changes the answer shows here, and in the side-by-side repetitions' fidelity verdicts).
Goals: throughput >= 3 at 10 Mbit/s on these 2 cores with results equal to one at a time; a side-by-side run
whose machine could not carry it says so in its verdicts (never a silent 0.9 of T_max).

Run as root: `make bench BENCH=study` -> results/bench/study.json (about 6 minutes).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CCRIG = [sys.executable, "-c", "from ccrig.experiments.cli.entry import main; main()"]
REPETITIONS, DURATION_S = 4, 15
RATES_MBIT = [10, 100, 300]
MODES = {"alone": "1", "side by side": "4"}


def _cell(rate: int, jobs: str, out: Path) -> dict:
    argv = [*CCRIG, "run", str(ROOT / "experiments/specs/default.yaml"), "--set", f"repetitions={REPETITIONS}",
            "--set", f"duration={DURATION_S}s", "--set", f"topology.bottleneck.rate={rate}mbit", "--jobs", jobs,
            "--prometheus", "off", "--no-progress", "--json", "--out", str(out)]
    t = time.monotonic()
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1:] or [f"exit {p.returncode}"], "wall_s": wall}
    summary = json.loads(p.stdout)
    point = summary["points"][0]
    g = point["system"]["goodput_bps"]
    reps = point["repetitions"]
    return {"jobs": summary.get("jobs"), "wall_s": round(wall, 1),
            "experiment_s_per_wall_s": round(REPETITIONS * DURATION_S / wall, 2),
            "goodput_bps": g["mean"], "ci95": g.get("ci95"), "ci_method": g["ci"]["method"],
            "goodput_of_t_max": [r["fidelity"].get("goodput_of_t_max") for r in reps],
            "verdicts": [r["fidelity"]["verdict"] for r in reps],
            "reasons": [x for r in reps for x in r["fidelity"]["reasons"]]}


def _overlap(a: dict, b: dict) -> bool | None:
    if not a.get("ci95") or not b.get("ci95"):
        return None
    return a["ci95"][0] <= b["ci95"][1] and b["ci95"][0] <= a["ci95"][1]


def run() -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"ccrig-bench-study-{os.getpid()}-"))
    cells = []
    for rate in RATES_MBIT:
        by_mode = {mode: _cell(rate, jobs, out) for mode, jobs in MODES.items()}
        alone, side = by_mode["alone"], by_mode["side by side"]
        speedup = alone["wall_s"] / side["wall_s"] if "error" not in alone and "error" not in side else None
        cells.append({"rate_mbit": rate, **by_mode,
                      "wall_ratio": None if speedup is None else round(1 / speedup, 3),
                      "agree": _overlap(alone, side)})
        print(json.dumps(cells[-1]), flush=True)
    ten = cells[0]["side by side"]
    return {"repetitions": REPETITIONS, "duration_s": DURATION_S, "cells": cells,
            "goal_throughput_at_10mbit": 3.0,
            "throughput_at_10mbit": ten.get("experiment_s_per_wall_s"),
            "met": (ten.get("experiment_s_per_wall_s") or 0) >= 3.0 and bool(cells[0]["agree"])}
