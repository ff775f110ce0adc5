"""Two runs of one study, claim by claim: does a verdict survive a rerun?

    compare(a, b) -> {"claims": [...], "agree": n, "of": n, "undecided": {...}, "without_interval": {...}}
    markdown(doc) -> the table RESULTS.md quotes
    compare_many(docs, labels) -> every pair's agreement, each claim's verdict in every run (three or more), and
                                  whether the runs' measures differ beyond their intervals (heterogeneity)
    markdown_many(doc) -> the matrix and the table

Each run is its claims.json (or the study directory holding it). Two verdicts agree when they are the same word;
`undecided` and `not-applicable` agree with nothing but themselves, so a claim one run could not decide counts
against agreement. A claim not applicable in both runs (a point neither run measured), or one run did not run
(a part of a study, --specs, leaves the other specs' claims so), is judged by neither: it is left out of the
agreement and the undecided share, and counted apart (`unjudged`); so is a claim only one run's study.yaml has (a
claim retired or added between the runs: `one_sided`), whatever its verdict there. A claim decided (holds, fails,
no-difference) without an interval over repetitions is named: the engine never gives one, so it marks a
claims.json from before it.

Holds (or fails) in one run and no-difference in the other is a disagreement, but not always a contradiction:
with a margin m, "holds" says the difference is above 0 and "no-difference" that it lies within ±m, and both are
true of a difference between 0 and m. Where the two intervals share a difference the pair is counted as
`compatible` (still not agreeing): which of the two a run reaches first is the sampling's, not the truth's (as the
interval narrows around d, no-difference comes first when |d| < m/2, holds or fails when |d| > m/2).

Whether the runs measured the same thing (heterogeneity): each quantity a claim reads (claims.json `values`: a
mean over n repetitions with its standard error) is tested across the runs that measured it by a one-way analysis
of variance from those summaries: between the runs, sum n_i (x_i - x)^2 / (k - 1), against within them, the
repetitions' variance pooled, sum (n_i - 1) n_i se_i^2 / (N - k); F with (k - 1, N - k) degrees of freedom (scipy).
Runs that measure the same thing give p-values uniform on [0, 1]: about one quantity in a hundred below 0.01 (k = 4
runs of 3 repetitions, 20000 simulated: 0.0096). Many more says a run-level effect the repetitions of one run do not
see (the machine, the day, a fault), and a verdict that moves between runs then need not be the sampling's; none
says the moves are. Not Cochran's Q (sum (x_i - x_w)^2 / se_i^2 against chi-squared), which takes each standard
error as known: estimated from 3 repetitions, one small by chance makes Q large, and the same simulation named
0.167 of equal quantities at 0.01. A ratio's standard error is the delta method's and its n the smaller sample's
(claims.json), so for ratios the pooled variance is that of an equivalent mean: approximate.

What the runs say together (`pooled`, in compare and compare_many): a claim whose difference every run judged by t over its
repetitions alone (claims.json `parts`: each point's coefficient c, sample variance and count n; the interval they
give back is the one stated, so no flat or binary point, no cut to a range; a point adjusted for the loss drawn
counts its n - 2 df and its intercept's variance) is combined over the runs by inverse
variance (a fixed-effect meta-analysis), with each point's variance s_p^2 pooled over the runs first (the runs
measured one thing, with one spread): v_r = sum_p c^2 s_p^2 / n, w_r = 1 / v_r, e = sum w_r e_r / sum w_r (e_r the
run's interval's midpoint), var e = 1 / sum w_r, Welch-Satterthwaite's df over the pooled variances; a 95 % t
interval, decided as a run decides (analysis/sequential.decide, with the claim's rule: claims.json `rule`). Weights
from each run's own variance instead held the truth in 85 % of 95 % intervals (three runs of 3, 6 and 12
repetitions, 4000 simulated); these in 95 % (94 % where one run's spread is three times the others'; the test:
tests/unit/test_study_compare.py), if the runs measured one difference (the F test above says where they did not). It
ignores that each run chose its sample sizes by looking: a reading of the runs together, not a verdict for a claims
table. Where runs decide a difference between 0 and the margin differently, it says what all their repetitions
support.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ccrig.analysis.samples import Estimate, Part, outside_the_run
from ccrig.analysis.sequential import Rule, decide, t_quantile
from ccrig.analysis.verdicts import slope
from ccrig.errors import InputError

DECIDED = ("holds", "fails", "no-difference")
HETEROGENEOUS_P = 0.01   # the F test's p below it: named


def load(path: Path) -> dict:
    """A run's claims.json, given itself or its study directory."""
    path = Path(path)
    file = path / "claims.json" if path.is_dir() else path
    try:
        doc = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: got no readable claims.json ({e}); expected a study directory or its "
                         f"claims.json") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
        raise InputError(f"{file}: got no list of claims; expected a claims.json that ccrig study report wrote")
    return doc


def _header(doc: dict) -> dict:
    return {k: doc.get(k) for k in ("study", "started", "seed", "host_kernel", "quick", "study_sha256")}


def compatible(x: dict, y: dict) -> bool:
    """Whether two decided verdicts of a claim that differ can both be true: holds or fails in one, no-difference
    in the other, and their intervals overlap (a difference in both lies between 0 and the margin)."""
    if {x.get("verdict"), y.get("verdict")} not in ({"holds", "no-difference"}, {"fails", "no-difference"}):
        return False
    (lx, hx), (ly, hy) = x.get("interval") or (None, None), y.get("interval") or (None, None)
    return None not in (lx, hx, ly, hy) and max(lx, ly) < min(hx, hy)


def compare(a: dict, b: dict) -> dict:
    """Claim by claim, the two runs' verdicts and measures, and the counts the issue's goals read."""
    if a.get("study") != b.get("study"):
        raise InputError(f"the two runs are of studies {a.get('study')!r} and {b.get('study')!r}; expected one study")
    first, second = ({c["id"]: c for c in d["claims"]} for d in (a, b))
    rows = []
    for cid in [*first, *(c for c in second if c not in first)]:
        x, y = first.get(cid, {}), second.get(cid, {})
        rows.append({"id": cid, "a": x.get("verdict", "absent"), "b": y.get("verdict", "absent"),
                     "agree": x.get("verdict") == y.get("verdict") and cid in first and cid in second,
                     "compatible": compatible(x, y),
                     "a_measured": x.get("measured"), "b_measured": y.get("measured"),
                     "pooled": pooled([x, y]) if x and y else None})
    # a claim one run did not run (its part left the spec out) cannot be judged between the two either
    unjudged = [r for r in rows if r["a"] == r["b"] == "not-applicable"
                or any(outside_the_run(side.get(r["id"], {})) for side in (first, second))]
    one_sided = [r for r in rows if "absent" in (r["a"], r["b"])]
    judged = [r for r in rows if r not in unjudged and r not in one_sided]

    def without_interval(doc: dict) -> list[str]:
        return [c["id"] for c in doc["claims"] if c.get("verdict") in DECIDED and not c.get("interval")]

    return {"a": _header(a), "b": _header(b), "claims": rows, "agree": sum(r["agree"] for r in judged),
            "compatible": sum(r["compatible"] for r in judged), "of": len(judged), "unjudged": len(unjudged),
            "one_sided": len(one_sided),
            "undecided": {side: sum(r[side] == "undecided" for r in judged) for side in ("a", "b")},
            "without_interval": {"a": without_interval(a), "b": without_interval(b)},
            "same_claims": a.get("study_sha256") == b.get("study_sha256")}


def compare_many(docs: list[dict], labels: list[str]) -> dict:
    """Three or more runs: each pair's agreement (as compare counts it) and each claim's verdict in every run.
    A claim is judged by the runs that ran its specs (a part of a study leaves the others' claims "not run"), and
    counted when two or more did; it is `stable` when they all gave it the same decided verdict, and `two_ways`
    when one said holds and another fails: the runs a study's RESULTS.md sets beside each other, read at once."""
    pairs = [{"a": labels[i], "b": labels[j], "agree": doc["agree"], "compatible": doc["compatible"], "of": doc["of"]}
             for i in range(len(docs)) for j in range(i + 1, len(docs)) for doc in [compare(docs[i], docs[j])]]
    claims = [{c["id"]: c for c in d["claims"]} for d in docs]
    by_run = [{cid: "not run" if outside_the_run(c) else c.get("verdict") for cid, c in run.items()} for run in claims]
    rows = []
    for cid in dict.fromkeys(c for run in by_run for c in run):
        verdicts = [run.get(cid, "absent") for run in by_run]
        ran = [v for v in verdicts if v not in ("absent", "not run")]
        decided = [run[cid] for run, v in zip(claims, verdicts) if v in DECIDED]
        rows.append({"id": cid, "verdicts": verdicts, "judged": len(ran) >= 2,
                     "stable": len(ran) >= 2 and len(set(ran)) == 1 and ran[0] in DECIDED,
                     "two_ways": {"holds", "fails"} <= set(ran),
                     # every run decided it, not all alike, and every two that differ can both be true
                     "compatible": len(ran) >= 2 and len(decided) == len(ran) and len(set(ran)) > 1
                     and all(x["verdict"] == y["verdict"] or compatible(x, y)
                             for i, x in enumerate(decided) for y in decided[i + 1:])})
    judged = [r for r in rows if r["judged"]]
    for r in rows:
        r["pooled"] = pooled([run[r["id"]] for run, v in zip(claims, r["verdicts"]) if v in (*DECIDED, "undecided")])
    return {"runs": [{"label": label, **_header(d)} for label, d in zip(labels, docs)], "pairs": pairs,
            "heterogeneity": heterogeneity(claims),
            "claims": rows, "stable": sum(r["stable"] for r in judged), "of": len(judged),
            "undecided": [{"undecided": sum(r["verdicts"][i] == "undecided" for r in judged),
                           "of": sum(r["verdicts"][i] not in ("absent", "not run") for r in judged)}
                          for i in range(len(docs))],
            "two_ways": [r["id"] for r in rows if r["two_ways"]],
            "compatible": [r["id"] for r in rows if r["judged"] and r["compatible"]]}


POOLED_LEVEL = 0.95
POOLED_NOTE = ("Pooled: each claim's difference over the runs that judged it by t over repetitions alone, combined by "
               "inverse variance (fixed effect, each point's spread pooled over the runs), its 95 % t interval "
               "(Welch-Satterthwaite df) decided as a run decides; a reading of the runs together, not a verdict "
               "(experiments/report/study_compare.py); – where a run's interval is not t alone.")


def pooled(runs: list[dict]) -> dict | None:
    """One claim's difference over two or more runs (the module's docstring): {"verdict", "mean", "interval",
    "level", "df", "runs"}, or None where a run's interval is not t over its repetitions alone (its parts do not
    give it back: a flat or binary point, a range's cut), the runs read different points, or the claim's rule
    cannot be known."""
    each = [_t_alone(c) for c in runs]
    rule = _rule_of(runs[0]) if runs else None
    if len(runs) < 2 or None in each or rule is None:
        return None
    parts = [_parts(c) for c in runs]
    if len({tuple(sorted(p.key for p in ps)) for ps in parts}) != 1:
        return None
    # each point's variance pooled over the runs (they measured one thing: one spread), so that the weights come
    # from counts and that spread, not from each run's own small-sample variance (those weights undercover: 85 %
    # of 95 % intervals held the truth over runs of 3, 6 and 12 repetitions)
    dof: dict[str, float] = {}
    ss: dict[str, float] = {}
    for p in (p for ps in parts for p in ps):
        dof[p.key] = dof.get(p.key, 0) + p.n - p.lost_df
        ss[p.key] = ss.get(p.key, 0.0) + (p.n - p.lost_df) * p.var
    s2 = {k: ss[k] / dof[k] for k in dof}
    v = [sum(p.coef ** 2 * s2[p.key] / p.n for p in ps) for ps in parts]
    w = [1 / vr for vr in v]
    big_w = sum(w)
    mean = sum(wi * e for wi, (e, _, _) in zip(w, each)) / big_w
    # its variance, sum_p a_p s2_p = 1 / W, with Welch-Satterthwaite's df over the points' pooled variances
    a: dict[str, float] = {}
    for wi, ps in zip(w, parts):
        for p in ps:
            a[p.key] = a.get(p.key, 0.0) + (wi / big_w) ** 2 * p.coef ** 2 / p.n
    df = (1 / big_w) ** 2 / sum((a[k] * s2[k]) ** 2 / dof[k] for k in a)
    half = t_quantile(POOLED_LEVEL, df) / math.sqrt(big_w)
    verdict = decide(mean, mean - half, mean + half, Rule(**rule))
    fitted = _pooled_slope(runs, rule)
    if fitted is not None and ((verdict == "holds" and fitted <= 0) or (verdict == "fails" and fitted >= 0)):
        verdict = "undecided"   # as a run's trend: the fitted slope must agree (analysis/verdicts._trend)
    return {"verdict": verdict, "mean": mean, "interval": [mean - half, mean + half], "level": POOLED_LEVEL,
            "df": df, "runs": len(runs)}


def _t_alone(claim: dict) -> tuple[float, float, float] | None:
    """A run's (difference, standard error, df) when its interval is t over repetitions and nothing else: the
    interval its parts give (Student's t at its level, Welch-Satterthwaite's df) is the one it states."""
    interval, level = claim.get("interval"), claim.get("level")
    if not claim.get("parts") or not interval or None in interval or not level:
        return None
    est = Estimate(0.0, tuple(_parts(claim)))
    if not all(p.var > 0 and p.n > p.lost_df for p in est.parts) or not est.se > 0:
        return None
    low, high = interval
    half = t_quantile(level, est.df) * est.se
    if not math.isclose(half, (high - low) / 2, rel_tol=1e-6):
        return None
    return (low + high) / 2, est.se, est.df


def _parts(claim: dict) -> list[Part]:
    """A run's parts (claims.json: key, coef, var, n, lost_df). A claims.json from before lost_df was written
    (2026-12-07) names the points it adjusted for the loss drawn (n - 2 df) in its basis; the interval they give
    back (_t_alone) is the check that the names were read right."""
    m = re.search(r"adjusted for the loss drawn at (.+?) \(control variate", claim.get("basis") or "")
    named = {k: 2 for k in m.group(1).split(", ")} if m else {}
    return [Part(p[0], p[1], p[2], p[3], lost_df=p[4] if len(p) > 4 else named.get(p[0], 1)) for p in claim["parts"]]


def _rule_of(claim: dict) -> dict | None:
    """The rule a run decided the claim by (claims.json `rule`); a claims.json from before it: a `within` claim's
    tolerance from its measured text, any other a sided rule with the claim's margin (want: the trend's direction,
    from the sign of the difference judged against its series' ends)."""
    if claim.get("rule"):
        return dict(claim["rule"])
    m = re.search(r"\(value \S+ ± ([^)]+)\)$", claim.get("measured") or "")
    if m:
        return {"kind": "within", "tol": float(m.group(1))}
    rule = {"kind": "sided", "margin": float(claim.get("margin") or 0.0)}
    series = _series_of(claim)
    if series is not None and claim.get("interval"):
        ends = series[-1][1]["mean"] - series[0][1]["mean"]
        if ends:
            rule["want"] = 1 if sum(claim["interval"]) * ends > 0 else -1
    return rule


def _series_of(claim: dict) -> list | None:
    values = claim.get("values") or {}
    series = values.get("series") or (values.get("a") if isinstance(values.get("a"), list) else None)
    return series if series and all(isinstance(v, dict) and v.get("mean") is not None for _, v in series) else None


def _pooled_slope(runs: list[dict], rule: dict) -> float | None:
    """A trend claim's fitted slope over the runs' series pooled point by point (inverse variance, or the plain
    mean where a point has no spread), times its direction; None for a claim that is no trend."""
    series = [_series_of(c) for c in runs]
    if None in series or "want" not in rule or len({tuple(x for x, _ in s) for s in series}) != 1:
        return None
    means = []
    for i, (x, _) in enumerate(series[0]):
        vs = [s[i][1] for s in series]
        w = [1 / v["se"] ** 2 if v.get("se") else 0.0 for v in vs]
        means.append((x, Estimate(sum(wi * v["mean"] for wi, v in zip(w, vs)) / sum(w) if all(w)
                                  else sum(v["mean"] for v in vs) / len(vs))))
    return slope(means) * rule["want"]


def heterogeneity(claims: list[dict[str, dict]]) -> dict:
    """The one-way F test for every quantity two or more runs measured with a standard error over two or more
    repetitions (the module's docstring), each once (claims that read the same measures at the same points are
    one quantity), the first claim that reads it named."""
    from scipy.stats import f as f_dist   # lazy: compare alone needs no scipy
    quantities: dict[tuple, list] = {}
    for cid in dict.fromkeys(c for run in claims for c in run):
        for name in dict.fromkeys(n for run in claims for n in (run.get(cid, {}).get("values") or {})):
            runs = [v for run in claims for v in [(run.get(cid, {}).get("values") or {}).get(name)]
                    if isinstance(v, dict) and v.get("se") and v.get("mean") is not None and (v.get("n") or 0) >= 2]
            if len(runs) >= 2:
                key = tuple((v["mean"], v["se"], v["n"]) for v in runs)
                quantities.setdefault(key, [cid, name, sorted(runs[0].get("points") or {})])
    tested = []
    for key, (cid, name, points) in quantities.items():
        k, total = len(key), sum(n for _, _, n in key)
        grand = sum(n * m for m, _, n in key) / total
        between = sum(n * (m - grand) ** 2 for m, _, n in key) / (k - 1)
        within = sum((n - 1) * n * se ** 2 for _, se, n in key) / (total - k)
        stat = between / within
        tested.append({"claim": cid, "quantity": name, "points": points, "runs": k, "f": stat,
                       "df": [k - 1, total - k], "p": float(f_dist.sf(stat, k - 1, total - k))})
    tested.sort(key=lambda t: t["p"])
    return {"tested": len(tested), "level": HETEROGENEOUS_P, "quantities": tested,
            "method": "one-way ANOVA from each run's mean, standard error and repetitions (variance pooled)",
            "below": [t for t in tested if t["p"] < HETEROGENEOUS_P]}


def markdown_many(doc: dict) -> str:
    labels = [r["label"] for r in doc["runs"]]
    n = doc["of"] or 1
    agree = {(p["a"], p["b"]): p for p in doc["pairs"]}

    def cell(x: str, y: str) -> str:
        p = agree.get((x, y)) or agree.get((y, x))
        return "–" if p is None or not p["of"] else f"{p['agree']}/{p['of']}"

    lines = ["Runs compared: " + "; ".join(f"{r['label']} (started {r['started']}, "
                                            + ("each spec's own seed" if r["seed"] is None else f"seed {r['seed']}")
                                            + ")" for r in doc["runs"]) + ".",
             f"The same decided verdict in every run that ran it: {doc['stable']} of {doc['of']} claims two or more "
             f"runs judged ({doc['stable'] / n:.0%})"
             "; undecided per run: " + ", ".join(f"{u['undecided']} of {u['of']}" for u in doc["undecided"])
             + "; decided two ways (holds in one run, fails in another): "
             + (", ".join(doc["two_ways"]) or "none")
             + "; decided in every run, differently but without contradiction (holds or fails beside no "
               "difference, the intervals sharing a difference within the margin): "
             + (", ".join(doc["compatible"]) or "none")
             + ".", "", _heterogeneity_line(doc["heterogeneity"]), "",
             "| agreement | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    lines += [f"| {x} | " + " | ".join("" if x == y else cell(x, y) for y in labels) + " |" for x in labels]
    lines += ["", "| claim | " + " | ".join(labels) + " | stable | the runs pooled |",
              "|---|" + "---|" * (len(labels) + 2)]
    lines += [f"| {r['id']} | " + " | ".join("–" if v == "not run" else v for v in r["verdicts"])
              + f" | {'yes' if r['stable'] else ''} | {_pooled_cell(r['pooled'])} |" for r in doc["claims"]
              if any(v not in ("absent", "not run") for v in r["verdicts"])]   # a part none of them ran: no row
    lines += ["", POOLED_NOTE]
    return "\n".join(lines) + "\n"


def _pooled_cell(p: dict | None) -> str:
    if p is None:
        return "–"
    lo, hi = p["interval"]
    return f"{p['verdict']} [{lo:.3g}, {hi:.3g}] ({p['runs']} runs)"


def _heterogeneity_line(h: dict) -> str:
    named = "; ".join(f"{t['claim']} {t['quantity']} ({', '.join(t['points'])}): F {t['f']:.1f} on "
                      f"{t['df'][0]} and {t['df'][1]} df, p {t['p']:.2g}" for t in h["below"])
    return (f"Between the runs (one-way ANOVA of each quantity over the runs' repetitions, from their means, standard "
            f"errors and counts; runs that measure the same thing give about {h['level']:.0%} of them below p "
            f"{h['level']:g}): {len(h['below'])} of {h['tested']} quantities below" + (f": {named}." if named else "."))


def markdown(doc: dict) -> str:
    n = doc["of"] or 1
    def seed(h: dict) -> str:
        return "each spec's own seed" if h["seed"] is None else f"seed {h['seed']}"

    lines = [f"Runs compared: A started {doc['a']['started']} ({seed(doc['a'])}), B started "
             f"{doc['b']['started']} ({seed(doc['b'])})"
             + ("" if doc["same_claims"] else "; **their study.yaml differ** (study_sha256)") + ".",
             f"Agreement: {doc['agree']} of {doc['of']} verdicts ({doc['agree'] / n:.0%})"
             + (f" ({doc['unjudged']} claim(s) not applicable in both, left out)" if doc.get("unjudged") else "")
             + (f" ({doc['one_sided']} claim(s) in one run's study.yaml only, left out)" if doc.get("one_sided")
                else "")
             + "; undecided: "
             f"{doc['undecided']['a']} in A, {doc['undecided']['b']} in B ({doc['undecided']['a'] / n:.0%}, "
             f"{doc['undecided']['b'] / n:.0%}); decided without an interval over repetitions: "
             f"{len(doc['without_interval']['a'])} in A, {len(doc['without_interval']['b'])} in B; "
             f"disagreeing without contradiction (holds or fails beside no difference, the intervals sharing a "
             f"difference within the margin): {doc['compatible']}.", "",
             "| claim | A | B | A measured | B measured | A and B pooled |", "|---|---|---|---|---|---|"]
    for r in doc["claims"]:
        mark = "" if r["agree"] else "**"
        lines.append(f"| {r['id']} | {mark}{r['a']}{mark} | {mark}{r['b']}{mark} | {r['a_measured'] or '–'} | "
                     f"{r['b_measured'] or '–'} | {_pooled_cell(r['pooled'])} |")
    return "\n".join(lines) + "\n\n" + POOLED_NOTE + "\n"
