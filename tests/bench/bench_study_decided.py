"""The wall time to a decided study: `ccrig study run alphabeta --budget 30m` (study 001, every spec on netns, the
engine's defaults: --jobs auto, k0 repetitions, then more where claims are undecided). Goal: every claim decided
(holds, fails, no-difference or not-applicable) within 30 minutes here.

Reports the wall time, the verdicts by kind, the looks (repetitions added, budget spent, why the loop stopped)
and each undecided claim with what it still needs. The study's own claims are whatever its study.yaml says at the
time: a bench of the engine on a real study, not a judgement of the paper (that is the study's RESULTS.md).

Run as root: `make bench BENCH=study_decided` -> results/bench/study_decided.json (up to about 35 minutes); the
study directory stays in results/bench/study_decided/.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CCRIG = [sys.executable, "-c", "from ccrig.experiments.cli.entry import main; main()"]
STUDY, BUDGET = "alphabeta", "30m"
GOAL_S = 30 * 60


def run() -> dict:
    # the study directory is kept (its claims.json, the runs' archives) for whoever reads the figures below
    out = ROOT / "results/bench/study_decided"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    load = round(os.getloadavg()[0], 2)
    t = time.monotonic()
    p = subprocess.run([*CCRIG, "study", "run", STUDY, "--budget", BUDGET, "--out", str(out), "--prometheus",
                        "off", "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=GOAL_S + 900)
    wall = time.monotonic() - t
    dirs = [d for d in out.iterdir() if d.is_dir()]
    if not dirs or not (dirs[0] / "claims.json").is_file():
        return {"study": STUDY, "error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1],
                "wall_s": round(wall, 1)}
    claims = json.loads((dirs[0] / "claims.json").read_text())
    loop = claims.get("loop") or {}
    verdicts = Counter(c["verdict"] for c in claims["claims"])
    undecided = [{"id": c["id"], "basis": c.get("basis"), "needs": c.get("needs")} for c in claims["claims"]
                 if c["verdict"] == "undecided"]
    return {"study": STUDY, "budget": BUDGET, "exit": p.returncode, "wall_s": round(wall, 1),
            "load_average_before": load, "verdicts": dict(verdicts), "undecided": undecided,
            "looks": [{k: v for k, v in look.items() if k != "verdicts"} for look in loop.get("looks", [])],
            "stopped": loop.get("stopped"), "error_rate": claims.get("error_rate"),
            "met": p.returncode == 0 and not undecided and wall <= GOAL_S, "study_dir": str(dirs[0])}

