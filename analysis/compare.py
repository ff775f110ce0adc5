"""Two runs' summary.json side by side, flows alike pooled: the arithmetic of `ccrig compare` (experiments/compare.py
reads the run directories and says which flows are alike, from their spec).

Flows alike are exchangeable: which of two cubic flows gets more of a drop-tail link in one run is chance (on
netns the two cubic flows of the default spec were seen to swap 1.7 and 2.2 Mbit/s between two runs, while their
mean moved 1.4 %). So the goodput of a flow is estimated by the mean over the flows alike to it and over the
repetitions, and two runs are compared class by class; a flow alone in its class is compared as itself. Every
number is read from summary.json, nothing is recomputed.

Each ratio B/A has a 95 % confidence interval where the runs give the spread to compute one (delta method,
analysis.stats.ratio_ci): over repetitions, or over one repetition's intervals for a flow alone in its class
and for the system; a class of several flows in one repetition has none. Over repetitions, an interval that
holds 1 says the runs differ by no more than their run-to-run spread, and a wide one that more repetitions are
needed; over one repetition's intervals it speaks for those two runs only (a flow's share can stay in one mode
for a whole run, and another run may fall into the other).
"""
from __future__ import annotations

from ccrig.analysis.stats import ratio_ci, summarize
from ccrig.errors import InputError


def classes(summary: dict, keys: list[dict[int, str]]) -> list[dict]:
    """Per point: {class key: {"flows": [index], "goodput_bps": {"mean", "std", "n"} of the class}}, where
    keys[point][flow] is the class of each flow of the point. A flow alone in its class has its own summary; a
    class of several, the mean over its flows, and its spread over the repetitions (each repetition's mean over
    the class's flows) where there are two or more."""
    out = []
    for point in summary["points"]:
        key_of = keys[point["index"]]
        by: dict[str, dict] = {}
        for entry in point["flows"]:
            c = by.setdefault(key_of[entry["flow"]], {"flows": [], "summaries": []})
            c["flows"].append(entry["flow"])
            c["summaries"].append(entry.get("goodput_bps") or {})
        reps = point.get("repetitions") or []
        res = {}
        for key, c in by.items():
            if len(c["flows"]) == 1:
                stats = c["summaries"][0]
            elif len(reps) >= 2:
                stats = summarize([_mean(r, c["flows"]) for r in reps])
            else:
                means = [x["mean"] for x in c["summaries"] if x.get("mean") is not None]
                stats = {"mean": sum(means) / len(means) if means else None, "n": 1}
            res[key] = {"flows": c["flows"], "goodput_bps": stats}
        out.append(res)
    return out


def _mean(rep: dict, flows: list[int]) -> float | None:
    """One repetition's mean goodput over the given flows."""
    xs = [(e.get("goodput_bps") or {}).get("mean") for e in rep.get("flows", []) if e["flow"] in flows]
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def compare_summaries(summary_a: dict, keys_a: list[dict[int, str]], summary_b: dict,
                      keys_b: list[dict[int, str]]) -> list[dict]:
    """Run B against run A (each its summary.json and its flows' classes, as `classes` takes them): one row per
    point and class of alike flows, plus one per point for the system:
    {"point", "class", "flows", "a_bps", "b_bps", "ratio", "ratio_ci95"} (ratio = b / a; its interval or None)."""
    sa, sb = summary_a, summary_b
    if len(sa["points"]) != len(sb["points"]):
        raise InputError(f"RUN_B: has {len(sb['points'])} points, RUN_A {len(sa['points'])}; expected two runs "
                         f"of the same spec (the testbed may differ)")
    rows = []
    for i, (ca, cb) in enumerate(zip(classes(sa, keys_a), classes(sb, keys_b))):
        if set(ca) != set(cb):
            raise InputError(f"RUN_B: point {i} has flows {sorted(cb)}, RUN_A {sorted(ca)}; expected two runs of "
                             f"the same spec")
        for key in ca:
            rows.append(_row(i, key, ca[key]["flows"], ca[key]["goodput_bps"], cb[key]["goodput_bps"]))
        rows.append(_row(i, "system", [], sa["points"][i]["system"]["goodput_bps"],
                         sb["points"][i]["system"]["goodput_bps"]))
    return rows


def _row(point: int, key: str, flows: list[int], a: dict, b: dict) -> dict:
    ratio, half = ratio_ci(b, a)
    return {"point": point, "class": key, "flows": flows, "a_bps": a.get("mean"), "b_bps": b.get("mean"),
            "ratio": ratio, "ratio_ci95": None if half is None else [ratio - half, ratio + half]}


def outside(rows: list[dict], tolerance: float) -> list[dict]:
    """The rows whose ratio is further than tolerance from 1 (or has no value)."""
    return [r for r in rows if r["ratio"] is None or abs(r["ratio"] - 1) > tolerance]
