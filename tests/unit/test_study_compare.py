"""Two runs of a study compared claim by claim (experiments/report/study_compare.py), and the seed a second run takes
(ccrig study run --seed)."""
import json

import numpy as np
import pytest
from scipy import stats as st

from ccrig.errors import InputError
from ccrig.experiments.report import study_compare
from ccrig.experiments.run.study import resolved
from ccrig.experiments.run.study_file import load


def run(verdicts: dict, seed: int, sha: str = "s1", study: str = "alphabeta") -> dict:
    return {"study": study, "started": f"2026-11-2{seed}T00:00:00+00:00", "seed": seed, "study_sha256": sha,
            "claims": [{"id": k, "verdict": v, "measured": f"{k}={seed}",
                        "interval": [0.1, 0.2] if v in ("holds", "fails", "no-difference") else None}
                       for k, v in verdicts.items()]}


def test_agreement_counts_the_same_verdicts_and_undecided_agrees_only_with_itself():
    a = run({"c1": "holds", "c2": "undecided", "c3": "fails", "c4": "no-difference"}, 5)
    b = run({"c1": "holds", "c2": "holds", "c3": "fails", "c4": "undecided"}, 6)
    doc = study_compare.compare(a, b)
    assert doc["agree"] == 2 and doc["of"] == 4 and doc["undecided"] == {"a": 1, "b": 1}
    assert [r["agree"] for r in doc["claims"]] == [True, False, True, False]
    md = study_compare.markdown(doc)
    assert "Agreement: 2 of 4 verdicts (50%)" in md and "| c2 | **undecided** | **holds** |" in md
    assert "seed 5" in md and "study.yaml differ" not in md


def test_a_claim_in_one_run_only_and_a_verdict_without_an_interval_are_named():
    a = run({"c1": "holds"}, 5)
    a["claims"][0]["interval"] = None   # a claims.json from before the engine: means only
    b = run({"c1": "holds", "c2": "fails"}, 6, sha="s2")
    doc = study_compare.compare(a, b)
    # c2 was added between the runs (a new claim, or a retired one the other way): one run cannot have judged it,
    # so it is shown but neither agrees nor disagrees (keshav's runs E and J: 6 of 13 counted, 6 of 7 measured)
    assert doc["claims"][1]["a"] == "absent" and doc["one_sided"] == 1
    assert doc["of"] == 1 and doc["agree"] == 1 and doc["undecided"] == {"a": 0, "b": 0}
    assert doc["without_interval"] == {"a": ["c1"], "b": []} and not doc["same_claims"]
    md = study_compare.markdown(doc)
    assert "their study.yaml differ" in md and "(1 claim(s) in one run's study.yaml only, left out)" in md
    assert "| c2 | **absent** | **fails** |" in md



def test_claims_neither_run_judged_are_left_out_of_agreement_and_counted_apart():
    # two runs of one part of a study: the other specs' claims are not applicable in both
    a = run({"c1": "holds", "c2": "undecided", "x1": "not-applicable", "x2": "not-applicable"}, 5)
    b = run({"c1": "holds", "c2": "holds", "x1": "not-applicable", "x2": "undecided"}, 6)
    doc = study_compare.compare(a, b)
    assert doc["agree"] == 1 and doc["of"] == 3 and doc["unjudged"] == 1
    md = study_compare.markdown(doc)
    assert "Agreement: 1 of 3 verdicts (33%) (1 claim(s) not applicable in both, left out)" in md
    assert "undecided: 1 in A, 1 in B (33%, 33%)" in md

def not_run(doc: dict, *ids: str) -> dict:
    """The claims a part of the study left out (--specs): not applicable, with the words analysis/verdicts gives."""
    for c in doc["claims"]:
        if c["id"] in ids:
            c.update(verdict="not-applicable", basis=f"spec {c['id']}_spec was not run", interval=None)
    return doc


def test_a_claim_one_run_did_not_run_is_judged_by_neither():
    # run 1 ran part x, run 2 part y: nothing between them can agree or disagree
    a = not_run(run({"x1": "holds", "y1": "holds"}, 5), "y1")
    b = not_run(run({"x1": "holds", "y1": "fails"}, 6), "x1")
    doc = study_compare.compare(a, b)
    assert doc["of"] == 0 and doc["unjudged"] == 2
    # a claim not applicable for its own reasons (no usable repetition) still counts against agreement
    c = run({"x1": "holds", "y1": "fails"}, 7)
    c["claims"][0].update(verdict="not-applicable", basis="no usable repetition at x#0")
    doc = study_compare.compare(a, c)
    assert doc["of"] == 1 and doc["agree"] == 0 and doc["unjudged"] == 1


def test_many_runs_give_every_pairs_agreement_and_each_claims_verdicts():
    runs = [run({"c1": "holds", "c2": "undecided", "c3": "fails", "c4": "holds"}, 1),
            run({"c1": "holds", "c2": "holds", "c3": "fails", "c4": "fails"}, 2),
            not_run(run({"c1": "holds", "c2": "holds", "c3": "fails", "c4": "holds"}, 3), "c3")]
    for r in runs:   # a claim of a part none of the three ran
        r["claims"].append(not_run(run({"x9": "holds"}, 0), "x9")["claims"][0])
    doc = study_compare.compare_many(runs, ["A", "B", "C"])
    assert [(p["a"], p["b"], p["agree"], p["of"]) for p in doc["pairs"]] == [
        ("A", "B", 2, 4), ("A", "C", 2, 3), ("B", "C", 2, 3)]
    # c3 is judged by the two runs that ran it, and holds its verdict in both; c4 was decided two ways
    assert [r["stable"] for r in doc["claims"]] == [True, False, True, False, False]
    assert doc["stable"] == 2 and doc["of"] == 4 and doc["two_ways"] == ["c4"]
    assert [u["undecided"] for u in doc["undecided"]] == [1, 0, 0]
    assert [u["of"] for u in doc["undecided"]] == [4, 4, 3]   # C did not run c3
    md = study_compare.markdown_many(doc)
    assert "undecided per run: 1 of 4, 0 of 4, 0 of 3;" in md and "| A |  | 2/4 | 2/3 |" in md
    assert "| c3 | fails | fails | – | yes |" in md and "x9" not in md
    assert "2 of 4 claims two or more runs judged (50%)" in md and "fails in another): c4;" in md
    assert doc["compatible"] == [] and "within the margin): none." in md


def with_interval(doc: dict, cid: str, low: float, high: float) -> dict:
    next(c for c in doc["claims"] if c["id"] == cid)["interval"] = [low, high]
    return doc


def test_holds_beside_no_difference_is_compatible_only_where_the_intervals_share_a_difference():
    # study 000's fig7-files-beat-bulk, margin 1 point: holds [0.08, 1.45] in run X, no difference [-0.16, 0.90]
    # in run V: a gain between 0.08 and 0.90 makes both true; a disagreement all the same
    x = with_interval(run({"c1": "holds", "c2": "holds", "c3": "fails", "c4": "undecided"}, 1), "c1", 0.08, 1.45)
    v = with_interval(run({"c1": "no-difference", "c2": "no-difference", "c3": "no-difference", "c4": "holds"}, 2),
                      "c1", -0.16, 0.90)
    with_interval(x, "c2", 0.95, 1.6)
    with_interval(v, "c2", -0.5, 0.9)        # holds above 0.95, no difference below 0.9: one of them is wrong
    with_interval(x, "c3", -0.9, -0.2)
    with_interval(v, "c3", -0.3, 0.4)        # a difference between -0.3 and -0.2 makes both true
    doc = study_compare.compare(x, v)
    assert [r["compatible"] for r in doc["claims"]] == [True, False, True, False]
    assert doc["agree"] == 0 and doc["compatible"] == 2
    assert "within the margin): 2." in study_compare.markdown(doc)
    many = study_compare.compare_many([x, v, x], ["X", "V", "X2"])
    assert many["compatible"] == ["c1", "c3"] and many["pairs"][0]["compatible"] == 2
    assert "within the margin): c1, c3." in study_compare.markdown_many(many)


def test_runs_that_measured_a_quantity_differently_beyond_their_errors_are_named():
    """A one-way ANOVA per quantity (claims.json values: mean, se, n): equal means within their spread pass, one run
    far off is named; a quantity two claims read is tested once; one without a standard error (a model's) or
    from a single repetition is not tested."""
    def values(gain, off, n_b=0):
        doc = run({"c1": "holds", "c2": "holds", "c3": "no-difference"}, 1)
        pts = {"s#1": 12, "s#1/baseline": 12}
        doc["claims"][0]["values"] = {"a": {"mean": gain, "se": 0.2, "n": 12, "points": pts},
                                      "b": {"mean": 3.0, "se": None, "n": n_b, "points": {}}}
        doc["claims"][1]["values"] = {"a": {"mean": gain, "se": 0.2, "n": 12, "points": pts}}   # the same
        doc["claims"][2]["values"] = {"q": {"mean": off, "se": 0.1, "n": 9, "points": {"s#2": 9}},
                                      "r": {"mean": off, "se": 0.1, "n": 1, "points": {"s#3": 1}}}
        return doc
    docs = [values(0.5, 1.0), values(0.7, 1.05), values(0.4, 1.6), values(0.6, 0.95)]
    h = study_compare.compare_many(docs, ["A", "B", "C", "D"])["heterogeneity"]
    assert h["tested"] == 2 and [t["claim"] for t in h["quantities"]] == ["c3", "c1"]
    # c3's q: 1.0, 1.05, 1.6, 0.95, n 9 each (se 0.1: a variance of 0.09 a repetition): grand mean 1.15; between
    # 9 (0.15^2 + 0.1^2 + 0.45^2 + 0.2^2) / 3 = 0.825, within 4 * 8 * 0.09 / 32 = 0.09: F = 9.17 on 3 and 32 df
    worst = h["quantities"][0]
    assert worst["f"] == pytest.approx(0.825 / 0.09) and worst["df"] == [3, 32]
    assert worst["p"] == pytest.approx(st.f.sf(0.825 / 0.09, 3, 32))
    assert h["below"] == [worst] and worst["points"] == ["s#2"] and worst["runs"] == 4
    assert h["quantities"][1]["p"] > 0.5   # 0.5, 0.7, 0.4, 0.6 with se 0.2 at n 12: F = 0.42
    md = study_compare.markdown_many(study_compare.compare_many(docs, ["A", "B", "C", "D"]))
    assert "1 of 2 quantities below: c3 q (s#2): F 9.2 on 3 and 32 df, p 0.00016." in md


def test_equal_quantities_from_three_repetitions_a_run_are_named_at_the_tests_level():
    """Four runs of three repetitions each, the same quantity: at most about 1 % named below 0.01 (3000
    simulated; Cochran's Q, which takes the estimated standard errors as known, named about 17 %)."""
    rng = np.random.default_rng(3)
    named = 0
    for _ in range(3000):
        docs = []
        for seed in range(4):
            x = rng.normal(5.0, 1.0, 3)
            doc = run({"c1": "holds"}, seed)
            doc["claims"][0]["values"] = {"a": {"mean": float(x.mean()), "se": float(x.std(ddof=1) / np.sqrt(3)),
                                                "n": 3, "points": {"s#1": 3}}}
            docs.append(doc)
        named += bool(study_compare.heterogeneity([{c["id"]: c for c in d["claims"]} for d in docs])["below"])
    assert named / 3000 <= 0.01 + 0.006


def test_compare_takes_two_or_more_runs_and_says_so(tmp_path):
    from typer.testing import CliRunner
    from ccrig.experiments.cli.app import app
    for name, seed in (("r1", 1), ("r2", 2), ("r3", 3)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "claims.json").write_text(json.dumps(run({"c1": "holds"}, seed)))
    three = CliRunner().invoke(app, ["study", "compare", *(str(tmp_path / n) for n in ("r1", "r2", "r3"))])
    assert three.exit_code == 0 and "| r1 |  | 1/1 | 1/1 |" in three.output, three.output
    one = CliRunner().invoke(app, ["study", "compare", str(tmp_path / "r1")])
    # main() turns the error into its one line and exit code 2 (tests/host/test_json_output.py runs the binary)
    assert isinstance(one.exception, InputError) and one.exception.exit_code == 2
    assert str(one.exception).startswith("RUNS: got 1 run; expected two or more")


def test_bad_inputs_name_what_is_expected(tmp_path):
    with pytest.raises(InputError, match="expected one study"):
        study_compare.compare(run({}, 1), run({}, 2, study="pause"))
    with pytest.raises(InputError, match="expected a study directory or its claims.json"):
        study_compare.load(tmp_path)
    (tmp_path / "claims.json").write_text(json.dumps({"claims": 3}))
    with pytest.raises(InputError, match="expected a claims.json"):
        study_compare.load(tmp_path)


def test_a_second_run_takes_its_seed_for_every_spec_quick_or_not():
    study, folder = load("alphabeta")
    entry = study.specs[0]
    assert resolved(folder, study, entry, False)[2].seed == 1801   # the spec's own
    assert {resolved(folder, study, entry, quick, None, 7)[2].seed for quick in (False, True)} == {7}


def _judged(values: list[float], margin: float, level: float = 0.95, series: bool = False) -> dict:
    """A run's claims.json entry for a difference d judged on one point's repetitions (as judge writes it)."""
    from ccrig.analysis.samples import from_reps
    from ccrig.analysis.sequential import Design, Rule, judge
    est = from_reps("p#0", dict(enumerate(values)))
    j = judge(est, Rule(margin=margin), design=Design(alpha=1 - level, max_looks=1))
    entry = {"id": "c", "verdict": j.verdict, "interval": [j.low, j.high], "level": j.level, "parts": j.parts,
             "rule": j.rule, "margin": margin, "basis": j.basis}
    if series:   # a trend's ends: a 0 at the first point, the difference at the last
        entry["values"] = {"series": [["x0", {"mean": 0.0, "se": 0.0}], ["x1", {"mean": est.mean, "se": est.se}]]}
    return entry


def test_runs_pooled_weigh_each_by_its_counts_and_the_spread_all_runs_share():
    rng = np.random.default_rng(7)
    data = [rng.normal(0.5, 1.0, n) for n in (8, 20, 12)]
    runs = [_judged(list(x), margin=1.0) for x in data]
    p = study_compare.pooled(runs)
    # one point: the pooled variance over the runs, weights n_r, so the mean of all repetitions and its t interval
    every = np.concatenate(data)
    s2 = sum((len(x) - 1) * np.var(x, ddof=1) for x in data) / (len(every) - 3)
    assert p["mean"] == pytest.approx(every.mean())
    assert p["df"] == pytest.approx(len(every) - 3)
    half = st.t.ppf(0.975, len(every) - 3) * np.sqrt(s2 / len(every))
    assert p["interval"] == pytest.approx([every.mean() - half, every.mean() + half])
    assert p["runs"] == 3 and p["level"] == 0.95
    # an interval its parts do not give back (a flat point's bound, a cut to the range) is not pooled
    runs[1]["interval"] = [runs[1]["interval"][0] - 0.1, runs[1]["interval"][1]]
    assert study_compare.pooled(runs) is None
    assert study_compare.pooled(runs[:1]) is None


def test_pooled_runs_settle_a_difference_inside_the_margin_that_single_runs_decide_either_way():
    # a difference of 0.5 against a margin of 1: a run of 10 repetitions (sd 1) reads holds or no-difference or
    # undecided by chance; five such runs pooled read no-difference
    rng = np.random.default_rng(3)
    verdicts, pooled = set(), []
    for _ in range(40):
        runs = [_judged(list(rng.normal(0.5, 1.0, 10)), margin=1.0) for _ in range(5)]
        verdicts |= {r["verdict"] for r in runs}
        pooled.append(study_compare.pooled(runs)["verdict"])
    assert {"holds", "no-difference"} <= verdicts
    assert pooled.count("no-difference") >= 36, pooled


def test_the_pooled_interval_covers_as_it_says():
    # 2000 sets of three runs of 3, 6 and 12 repetitions: the 95 % pooled interval holds the true difference in
    # 93-97 % of them (weights from each run's own variance: 85 %)
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(2000):
        runs = [_judged(list(rng.normal(0.2, 1.0, n)), margin=0.0) for n in (3, 6, 12)]
        lo, hi = study_compare.pooled(runs)["interval"]
        hits += lo <= 0.2 <= hi
    assert 0.93 <= hits / 2000 <= 0.97, hits / 2000


def test_a_pooled_trend_whose_fitted_slope_disagrees_is_undecided_and_old_claims_files_give_their_rule():
    rng = np.random.default_rng(5)
    runs = [_judged(list(rng.normal(2.0, 0.5, 8)), margin=0.5, series=True) for _ in range(3)]
    assert study_compare.pooled(runs)["verdict"] == "holds"
    for r in runs:   # a claims.json from before `rule`: the trend's direction from its interval and its ends
        del r["rule"]
    assert study_compare.pooled(runs)["verdict"] == "holds"
    for r in runs:   # the same ends' difference, but the series' middle falls below both ends' fit
        r["values"]["series"].insert(1, ["xm", {"mean": 10.0, "se": 0.1}])
        r["values"]["series"].append(["x2", {"mean": -10.0, "se": 0.1}])
    runs = [dict(r, rule={"kind": "sided", "want": 1, "strict": True, "margin": 0.5, "tol": 0.0}) for r in runs]
    assert study_compare.pooled(runs)["verdict"] == "undecided"
    within = dict(runs[0], measured="0.985 (se 0.01, n 6) (value 1 ± 0.1)")
    del within["rule"]
    assert study_compare._rule_of(within) == {"kind": "within", "tol": 0.1}


def test_a_point_adjusted_for_the_loss_drawn_is_pooled_with_its_n_minus_2_df():
    from ccrig.analysis.samples import Estimate, Part
    from ccrig.analysis.sequential import Design, Rule, judge
    runs = []
    for n, mean in ((8, 0.01), (12, 0.012)):
        est = Estimate(mean, (Part("p#0", 1.0, 0.0004 * n, n, mean, lost_df=2),))   # the intercept's se, 0.02
        j = judge(est, Rule(margin=0.005), design=Design(max_looks=1))
        assert "adjusted for the loss drawn at p#0" in j.basis
        runs.append({"id": "c", "verdict": j.verdict, "interval": [j.low, j.high], "level": j.level,
                     "parts": j.parts, "rule": j.rule, "margin": 0.005, "basis": j.basis})
    p = study_compare.pooled(runs)
    assert p is not None and p["df"] == pytest.approx(8 - 2 + 12 - 2)
    # the parts carry it (key, coef, var, n, lost_df): the basis's words are not read
    runs[0]["basis"] = "t over repetitions"
    assert study_compare.pooled(runs) == p
    # a claims.json from before that: its basis names the points, and without them the interval its parts give
    # (n - 1 df) is not the one it states
    old = [dict(r, parts=[q[:4] for q in r["parts"]]) for r in runs]
    assert study_compare.pooled(old) is None
    old[0]["basis"] = runs[1]["basis"]
    assert study_compare.pooled(old) == p
