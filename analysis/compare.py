"""Two runs' summary.json side by side, flows alike pooled: the arithmetic of `ccrig compare` (experiments/cli/compare.py
reads the run directories and says which flows are alike, from their spec).

Flows alike are exchangeable: which of two cubic flows gets more of a drop-tail link in one run is chance (on
netns the two cubic flows of the default spec were seen to swap 1.7 and 2.2 Mbit/s between two runs, while their
mean moved 1.4 %). So the goodput of a flow is estimated by the mean over the flows alike to it and over the
repetitions, and two runs are compared class by class; a flow alone in its class is compared as itself. Every
number is read from summary.json, nothing is recomputed.

Each ratio B/A has a confidence interval where the runs give one (`ratio_ci`: the delta method on
the two means' own intervals, each saying its method): over repetitions (method runs), or within one repetition
by batch means (method batches) for a flow alone in its class and for the system; a class of several flows in
one repetition, or a mean whose interval is "none", has none, and the row says why. Summaries written before
the confidence-interval change (no `ci`) get the old interval, t over interval means as if independent, and say so. Over repetitions, an interval that
holds 1 says the runs differ by no more than their run-to-run spread, and a wide one that more repetitions are
needed; over one repetition's intervals it speaks for those two runs only (a flow's share can stay in one mode
for a whole run, and another run may fall into the other).
"""
from __future__ import annotations

import math

from ccrig.analysis import stats
from ccrig.errors import InputError


def ratio_ci(num: dict, den: dict) -> dict:
    """num's mean over den's (two summary.json metrics) with its confidence interval, by the delta method on the
    two means' own intervals: relative half-widths added in quadrature, h_r = r·√((h_n/m_n)² + (h_d/m_d)²).
    Each half-width already carries its own method's degrees of freedom (t over runs, or over batch means), so
    no single df is needed. Returns {"ratio", "half", "level", "method", "reason"}: ratio None without both means
    or with den's at 0; half None (and reason) when either interval is "none"."""
    mn, md = num.get("mean"), den.get("mean")
    out = {"ratio": None, "half": None, "level": stats.LEVEL, "method": None, "reason": ""}
    if mn is None or md is None or md <= 0:
        out["reason"] = "no mean to divide" if mn is None or md is None else "the denominator's mean is 0"
        return out
    out["ratio"] = r = mn / md
    cn, cd = num.get("ci"), den.get("ci")
    if cn is None or cd is None:   # a summary without `ci`: mean, std, n over interval means
        r, half = stats.ratio_ci(num, den)
        # a summary.json without `ci`: t over interval means as if independent, too narrow for correlated ones
        out.update(half=half, method="delta method over interval means (a summary without `ci`)",
                   reason="" if half is not None else "fewer than 2 samples")
        return out
    out["level"] = cd.get("level", stats.LEVEL)
    if cn.get("method") == "none" or cd.get("method") == "none":
        out["reason"] = "; ".join(c.get("reason") or "no interval" for c in (cn, cd) if c.get("method") == "none")
        out["method"] = "none"
        return out
    methods = sorted({cn["method"], cd["method"]})
    out["method"] = f"delta method over {' and '.join(methods)}"
    out["half"] = math.hypot(cn["half_width"], r * cd["half_width"]) / md   # = r·√(...) above, also at m_n = 0
    return out


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
                st = c["summaries"][0]
            elif len(reps) >= 2:   # t over the repetitions' class means, saying so
                ci = stats.over_runs([m for m in (_mean(r, c["flows"]) for r in reps) if m is not None],
                                     _level(c["summaries"]))
                st = {"mean": ci.mean, "std": ci.std, "n": ci.n, "ci": ci.to_dict()}
            else:
                means = [x["mean"] for x in c["summaries"] if x.get("mean") is not None]
                st = {"mean": sum(means) / len(means) if means else None, "n": 1,
                      "ci": {"method": "none", "reason": "flows alike pooled within one repetition"}}
            res[key] = {"flows": c["flows"], "goodput_bps": st}
        out.append(res)
    return out


def _level(summaries: list[dict]) -> float:
    """The confidence level the run's intervals were made at (95 % unless its spec said otherwise)."""
    return next(((s.get("ci") or {}).get("level") for s in summaries if (s.get("ci") or {}).get("level")),
                stats.LEVEL)


def _mean(rep: dict, flows: list[int]) -> float | None:
    """One repetition's mean goodput over the given flows."""
    xs = [(e.get("goodput_bps") or {}).get("mean") for e in rep.get("flows", []) if e["flow"] in flows]
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def compare_summaries(summary_a: dict, keys_a: list[dict[int, str]], summary_b: dict,
                      keys_b: list[dict[int, str]]) -> list[dict]:
    """Run B against run A (each its summary.json and its flows' classes, as `classes` takes them): one row per
    point and class of alike flows, plus one per point for the system:
    {"point", "class", "flows", "a_bps", "b_bps", "ratio", "ratio_ci95", "ci_method", "ci_level", "ci_reason"}
    (ratio = b / a; its interval or None, how it was made or why there is none)."""
    sa, sb = summary_a, summary_b
    if len(sa["points"]) != len(sb["points"]):
        raise InputError(f"RUN_B: has {len(sb['points'])} points, RUN_A {len(sa['points'])}; expected two runs "
                         f"of the same spec (the testbed may differ)")
    for name, s in (("RUN_A", sa), ("RUN_B", sb)):
        for p in s["points"]:
            if "failed" in p:   # no repetition finished: nothing to compare (resume the run first)
                raise InputError(f"{name}: point {p['index']} failed ({p['failed']}); expected every point "
                                 f"measured (`ccrig run --resume` runs the failed points again)")
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
    r = ratio_ci(b, a)
    ratio, half = r["ratio"], r["half"]
    return {"point": point, "class": key, "flows": flows, "a_bps": a.get("mean"), "b_bps": b.get("mean"),
            "ratio": ratio, "ratio_ci95": None if half is None else [ratio - half, ratio + half],
            "ci_method": r["method"], "ci_level": r["level"], "ci_reason": r["reason"]}


def outside(rows: list[dict], tolerance: float) -> list[dict]:
    """The rows whose ratio is further than tolerance from 1 (or has no value)."""
    return [r for r in rows if r["ratio"] is None or abs(r["ratio"] - 1) > tolerance]
