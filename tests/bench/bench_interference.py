"""Interference (experiments/run/fidelity.py, reruns.py): the same repetitions alone and four side by side, at
10, 100 and 300 Mbit/s (the default spec: reno, cubic, bbr and cubic through a 100-packet pfifo).

Side by side is forced (`--jobs 4`, not auto's admission) so the machine meets what admission would keep it from.
Per rate: each mode's wall time, system goodput and its interval over the repetitions, and per first attempt
side by side: its goodput/T_max, its fidelity verdict and whether it differs from the alone repetitions (below
the lowest of those whose verdict was ok by more than DIFFERS of T_max). Reported:
- `flagged_what_differs`: every first attempt that differs was judged testbed-limited (the goal),
- `flagged_alike`: attempts judged testbed-limited that did not differ (the cost: reruns not needed),
- `agree`: the side-by-side run's goodput, after its spoiled attempts were rerun alone, equals the alone run's
  within bench_study.AGREE_MARGIN, judged as a study's claim is (bench_study.same_goodput; the goal: side by side
  gives the same answers as alone).
The machine's load average before each cell is recorded: others' work on it moves both modes.

Run as root: `make bench BENCH=interference` -> results/bench/interference.json (about 6 minutes).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

# tests/bench is the benches' own folder on sys.path (run.py)
from bench_study import goodput_by_rep, run_default, same_goodput

REPETITIONS, DURATION_S = 4, 8
RATES_MBIT = [10, 100, 300]
DIFFERS = 0.02   # of T_max below the lowest alone repetition: alone, the 4 repetitions span 0.002 at 300 Mbit/s


def _run(rate: int, jobs: str, out: Path) -> tuple[dict | None, float, str]:
    return run_default(rate, jobs, out, REPETITIONS, DURATION_S)


def _first_attempts(summary: dict, run_dir: Path) -> list[dict]:
    """Each pair's first attempt: an excluded one (its record moved aside) or the one that stood."""
    firsts = []
    for r in summary.get("reruns", []):
        if r.get("attempt") == 1 and "excluded" in r:
            firsts.append({"rep": r["rep"], **json.loads((run_dir / r["excluded"] / "repetition.json").read_text())})
    rerun = {r["rep"] for r in summary.get("reruns", []) if r.get("attempt") == 1}
    firsts += [r for r in summary["points"][0]["repetitions"] if r["rep"] not in rerun]
    return firsts


def _mode(summary: dict | None, wall: float, error: str) -> dict:
    if summary is None:
        return {"error": error, "wall_s": round(wall, 1)}
    g = summary["points"][0]["system"]["goodput_bps"]
    return {"jobs": summary.get("jobs"), "wall_s": round(wall, 1), "goodput_bps": g["mean"], "ci95": g.get("ci95"),
            "reruns": len(summary.get("reruns", [])), "goodput_by_rep": goodput_by_rep(summary),
            "unmeasurable": summary["points"][0].get("unmeasurable", []),
            "goodput_of_t_max": [round(r["fidelity"]["goodput_of_t_max"], 4)
                                 for r in summary["points"][0]["repetitions"]]}


def _cell(rate: int, out: Path) -> dict:
    load = os.getloadavg()[0]
    alone_s, alone_wall, alone_err = _run(rate, "1", out / f"alone-{rate}")
    side_s, side_wall, side_err = _run(rate, "4", out / f"side-{rate}")
    cell = {"rate_mbit": rate, "load_average_before": round(load, 2), "alone": _mode(alone_s, alone_wall, alone_err),
            "side_by_side": _mode(side_s, side_wall, side_err)}
    if alone_s is None or side_s is None:
        return cell
    # the alone repetitions that stood (a busy machine spoils some of those too: they are no yardstick)
    standing = [r for r in alone_s["points"][0]["repetitions"] if r["fidelity"]["verdict"] == "ok"] or \
        alone_s["points"][0]["repetitions"]
    lowest = min(r["fidelity"]["goodput_of_t_max"] for r in standing)
    run_dir = next((out / f"side-{rate}").iterdir())
    firsts = []
    for r in _first_attempts(side_s, run_dir):
        share = r["fidelity"]["goodput_of_t_max"]
        firsts.append({"rep": r["rep"], "goodput_of_t_max": round(share, 4), "verdict": r["fidelity"]["verdict"],
                       "differs": share < lowest - DIFFERS, "reasons": r["fidelity"]["reasons"],
                       **({"spoiled": r["excluded"]} if "excluded" in r else {})})
    same = same_goodput(cell["alone"]["goodput_by_rep"], cell["side_by_side"]["goodput_by_rep"])
    cell.update(first_attempts_side_by_side=firsts,
                flagged_what_differs=all(f["verdict"] != "ok" for f in firsts if f["differs"]),
                flagged_alike=sum(1 for f in firsts if f["verdict"] != "ok" and not f["differs"]),
                agree=same.pop("agree"), same_goodput=same)
    return cell


def run() -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"ccrig-bench-interference-{os.getpid()}-"))
    cells = []
    try:
        for rate in RATES_MBIT:
            cells.append(_cell(rate, out))
            print(json.dumps(cells[-1]), flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"repetitions": REPETITIONS, "duration_s": DURATION_S, "differs_below_alone": DIFFERS, "cells": cells,
            "met": all(c.get("flagged_what_differs") and c.get("agree") for c in cells)}
