"""`ccrig compare RUN_A RUN_B`: two runs of one experiment side by side (two testbeds, kernels or machines),
to say whether the second reproduces the first.

This side reads the two run directories and says, from each run's resolved spec.yaml, which flows of a point
are alike (same congestion control, workload and start); analysis/compare.py pools the alike flows' goodput from
summary.json and gives each ratio B/A with its confidence interval and the method that made it (over
repetitions, or batch means within a run; why flows alike are pooled, and what the interval says, is told there).
"""
from __future__ import annotations

import json
from pathlib import Path

from ccrig.analysis.compare import compare_summaries
from ccrig.errors import InputError
from ccrig.experiments import spec as specmod


def load_run(run_dir: Path, arg: str = "RUN_DIR") -> tuple[dict, list[specmod.Point]]:
    """A run directory's summary.json and the sweep points of its resolved spec."""
    run_dir = Path(run_dir)
    if not (run_dir / "summary.json").is_file() or not (run_dir / "spec.yaml").is_file():
        raise InputError(f"{arg}: got {str(run_dir)!r}; expected a run directory holding summary.json and "
                         f"spec.yaml (results/runs/...)")
    summary = json.loads((run_dir / "summary.json").read_text())
    raw = specmod.load_raw(run_dir / "spec.yaml")
    exp = specmod.validate(raw, str(run_dir / "spec.yaml"))
    return summary, specmod.points(raw, exp, str(run_dir / "spec.yaml"))


def flow_class(flow: specmod.Flow) -> str:
    """What makes two flows of one point alike, as a readable key. The path is not part of it: the topologies
    give every flow an equivalent path (the dumbbell's access links are alike, the pause_chain's senders share
    link A)."""
    w = flow.workload
    work = w.kind if w.kind == "bulk" else f"{w.kind} {w.model_dump(exclude={'kind'})}"
    return f"{flow.cc_label}, {work}" + (f", from {flow.start:g}s" if flow.start else "")


def flow_classes(points: list[specmod.Point]) -> list[dict[int, str]]:
    """Per sweep point: each flow's index -> its class (flow_class)."""
    return [dict(enumerate(flow_class(f) for f in p.experiment.flow_list())) for p in points]


def compare(run_a: Path, run_b: Path) -> list[dict]:
    """One row per point and class of alike flows, plus one per point for the system:
    {"point", "class", "flows", "a_bps", "b_bps", "ratio", "ratio_ci95", "ci_method", "ci_level", "ci_reason"}
    (ratio = b / a; its interval or None, how it was made or why there is none)."""
    sa, pa = load_run(run_a, "RUN_A")
    sb, pb = load_run(run_b, "RUN_B")
    return compare_summaries(sa, flow_classes(pa), sb, flow_classes(pb))
