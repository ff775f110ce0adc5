"""The default spec as a check that one testbed reproduces another (netns against mininet, netns against hosts).

One run, two sweep points:
- point 0 is the default spec as it is: four flows of three laws (reno, cubic, bbr, cubic) share a 10 Mbit/s
  drop-tail link. How reno and cubic split their part is chance within one run (on netns alone, reno got 1.6 to
  2.3 Mbit/s over four 30 s runs, the two cubic flows swapped 1.7 and 2.2), so here the system goodput must
  agree within 10 %, and the per-flow table (flows alike pooled, analysis/compare.py) is printed for the record;
- point 1 holds each flow to its own 2 Mbit/s access link, so every flow's share is set by the topology and not
  by chance: there every flow's goodput must agree within 10 %.
"""
from __future__ import annotations

import json
from pathlib import Path

from ccrig.analysis.compare import outside
from ccrig.experiments.cli.compare import compare
from ccrig.experiments.spec import load_raw

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.10
STEADY_ACCESS = "2mbit"


def default_spec(duration: str = "10s") -> dict:
    """The default spec with a second point whose flows are held to their access links."""
    raw = load_raw(ROOT / "experiments" / "specs" / "default.yaml")
    raw["duration"] = duration
    # one repetition per point, as these comparisons of testbeds were made: the default's four are for its
    # figures' intervals, and Mininet and the hosts testbed run their pairs one at a time
    raw["repetitions"] = 1
    raw["sweep"] = {"topology.access.rate": [None, STEADY_ACCESS]}
    return raw


def check(reference: Path, run: Path, label: str) -> None:
    """Asserts run reproduces reference (two run directories of default_spec())."""
    rows = compare(reference, run)
    table = "\n".join(f"  point {r['point']} {r['class']:<14} {r['a_bps'] / 1e6:7.3f} {r['b_bps'] / 1e6:7.3f} "
                      f"{r['ratio']:.3f}" for r in rows if r["ratio"] is not None)
    print(f"\n{label} against netns (Mbit/s):\n{table}")
    system = [r for r in rows if r["point"] == 0 and r["class"] == "system"]
    assert len(system) == 1, rows
    assert not outside(system, TOLERANCE), f"{label}: system goodput not within 10 % of netns:\n{table}"
    # point 1: every flow's share is set by its access link, so each flow is compared as itself
    flows = [[f["goodput_bps"]["mean"] for f in json.loads((d / "summary.json").read_text())["points"][1]["flows"]]
             for d in (reference, run)]
    assert len(flows[0]) == len(flows[1]) == 4
    for i, (a, b) in enumerate(zip(*flows)):
        assert abs(b / a - 1) <= TOLERANCE, f"{label}: flow {i} at {STEADY_ACCESS} access: {b / 1e6:.3f} Mbit/s, " \
                                            f"{a / 1e6:.3f} on netns"
