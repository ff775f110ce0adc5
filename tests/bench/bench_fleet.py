"""The fleet's cost and speed-up (`ccrig run --fleet`, experiments/run/fleet.py): the same run of PAIRS short pairs
here one at a time (`--jobs 1`, no fleet) and dealt to 1, 2 and 4 local members (network namespaces with sshd of
their own, each running its batches with `--jobs 1` on this kernel, Ansible over real SSH).

Per cell: the wall time, the speed-up over one at a time here, and the engine's overhead per dealt pair ((wall
with one member - wall here) / pairs: the ansible-playbook per batch, the member's own `ccrig run` start and
preflight, the tarball fetched back). The members share these 2 cores, so the speed-up past two members measures
the engine's overlap of its overheads, not more CPU; on a real fleet each member brings its own.

Run as root: `make bench BENCH=fleet` -> results/bench/fleet.json (about 6 minutes).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from support.sshhosts import Host, SshHosts  # noqa: E402 - the test's SSH hosts, after the path above

CCRIG = str(Path(sys.executable).parent / "ccrig")
PAIRS, DURATION_S = 8, 5
MEMBERS = [1, 2, 4]


def _spec(out: Path) -> Path:
    spec = {"name": "benchfleet", "testbed": "netns",
            "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "100pkt", "qdisc": "pfifo"}},
            "flows": [{"cc": "reno"}], "duration": f"{DURATION_S}s", "interval": "1s", "warmup": 1,
            "repetitions": PAIRS}
    path = out / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _run(spec: Path, out: Path, *extra: str) -> dict:
    argv = [CCRIG, "run", str(spec), "--out", str(out), "--prometheus", "off", "--no-progress", "--json", *extra]
    t = time.monotonic()
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1], "wall_s": round(wall, 1)}
    summary = json.loads(p.stdout)
    point = summary["points"][0]
    return {"wall_s": round(wall, 1), "goodput_bps": point["system"]["goodput_bps"]["mean"],
            "ci95": point["system"]["goodput_bps"].get("ci95"),
            "verdicts": [r["fidelity"]["verdict"] for r in point["repetitions"]],
            "lost": (summary.get("fleet") or {}).get("lost", [])}


def run() -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"ccrig-bench-fleet-{os.getpid()}-"))
    spec = _spec(out)
    cells = []
    try:
        here = _run(spec, out / "here", "--jobs", "1")
        print(json.dumps({"here": here}), flush=True)
        for n in MEMBERS:
            bed = SshHosts([Host(f"f{i}", ["fleet"], extra={"ccrig_command": CCRIG, "ccrig_jobs": 1})
                            for i in range(1, n + 1)])
            with bed:
                cell = {"members": n, **_run(spec, out / f"fleet{n}", "--fleet", str(bed.inventory))}
            if "error" not in cell and "error" not in here:
                cell["speedup"] = round(here["wall_s"] / cell["wall_s"], 2)
            cells.append(cell)
            print(json.dumps(cell), flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    one = cells[0]
    overhead = None if "error" in one or "error" in here else round((one["wall_s"] - here["wall_s"]) / PAIRS, 2)
    return {"pairs": PAIRS, "duration_s": DURATION_S, "here_one_at_a_time": here, "cells": cells,
            "overhead_per_dealt_pair_s": overhead, "cores": os.cpu_count()}
