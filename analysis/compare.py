"""`ccrig compare RUN_A RUN_B`: two runs of one experiment side by side (two testbeds, kernels or machines),
to say whether the second reproduces the first.

Flows alike (same congestion control, workload and start, in the same point) are exchangeable: which of
two cubic flows gets more of a drop-tail link in one run is chance (on netns the two cubic flows of the default
spec were seen to swap 1.7 and 2.2 Mbit/s between two runs, while their mean moved 1.4 %). So the goodput of a
flow is estimated by the mean over the flows alike to it and over the repetitions, and two runs are compared
class by class; a flow alone in its class is compared as itself. Every number is read from summary.json and the
resolved spec.yaml of the run directories, nothing is recomputed.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from experiments import spec as specmod
from experiments.errors import InputError


def load_run(run_dir: Path, arg: str = "RUN_DIR") -> tuple[dict, list[specmod.Point]]:
    """A run directory's summary.json and the sweep points of its resolved spec."""
    run_dir = Path(run_dir)
    if not (run_dir / "summary.json").is_file() or not (run_dir / "spec.yaml").is_file():
        raise InputError(f"{arg}: got {str(run_dir)!r}; expected a run directory holding summary.json and "
                         f"spec.yaml (results/runs/...)")
    summary = json.loads((run_dir / "summary.json").read_text())
    raw = yaml.safe_load((run_dir / "spec.yaml").read_text())
    exp = specmod.validate(raw, str(run_dir / "spec.yaml"))
    return summary, specmod.points(raw, exp, str(run_dir / "spec.yaml"))


def flow_class(flow: specmod.Flow) -> str:
    """What makes two flows of one point alike, as a readable key. The path is not part of it: the topologies
    give every flow an equivalent path (the dumbbell's access links are alike, the pause_chain's senders share
    link A)."""
    w = flow.workload
    work = w.kind if w.kind == "bulk" else f"{w.kind} {w.model_dump(exclude={'kind'})}"
    return f"{flow.cc_label}, {work}" + (f", from {flow.start:g}s" if flow.start else "")


def classes(summary: dict, points: list[specmod.Point]) -> list[dict]:
    """Per point: {class key: {"flows": [index], "goodput_bps": mean over the class's flows}}."""
    out = []
    for point in summary["points"]:
        flows = points[point["index"]].experiment.flow_list()
        by: dict[str, dict] = {}
        for entry in point["flows"]:
            mean = (entry.get("goodput_bps") or {}).get("mean")
            c = by.setdefault(flow_class(flows[entry["flow"]]), {"flows": [], "values": []})
            c["flows"].append(entry["flow"])
            if mean is not None:
                c["values"].append(mean)
        out.append({k: {"flows": v["flows"],
                        "goodput_bps": sum(v["values"]) / len(v["values"]) if v["values"] else None}
                    for k, v in by.items()})
    return out


def compare(run_a: Path, run_b: Path) -> list[dict]:
    """One row per point and class of alike flows, plus one per point for the system:
    {"point", "class", "flows", "a_bps", "b_bps", "ratio"} (ratio = b / a)."""
    sa, pa = load_run(run_a, "RUN_A")
    sb, pb = load_run(run_b, "RUN_B")
    if len(sa["points"]) != len(sb["points"]):
        raise InputError(f"RUN_B: has {len(sb['points'])} points, RUN_A {len(sa['points'])}; expected two runs "
                         f"of the same spec (the testbed may differ)")
    rows = []
    for i, (ca, cb) in enumerate(zip(classes(sa, pa), classes(sb, pb))):
        if set(ca) != set(cb):
            raise InputError(f"RUN_B: point {i} has flows {sorted(cb)}, RUN_A {sorted(ca)}; expected two runs of "
                             f"the same spec")
        for key in ca:
            rows.append(_row(i, key, ca[key]["flows"], ca[key]["goodput_bps"], cb[key]["goodput_bps"]))
        ga = sa["points"][i]["system"]["goodput_bps"]["mean"]
        gb = sb["points"][i]["system"]["goodput_bps"]["mean"]
        rows.append(_row(i, "system", [], ga, gb))
    return rows


def _row(point: int, key: str, flows: list[int], a, b) -> dict:
    return {"point": point, "class": key, "flows": flows, "a_bps": a, "b_bps": b,
            "ratio": b / a if a and b is not None else None}


def outside(rows: list[dict], tolerance: float) -> list[dict]:
    """The rows whose ratio is further than tolerance from 1 (or has no value)."""
    return [r for r in rows if r["ratio"] is None or abs(r["ratio"] - 1) > tolerance]
