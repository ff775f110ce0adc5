"""A point adjusted for the random loss its repetitions drew (analysis/samples.adjusted, readings.loss_drawn): the
interval's coverage, what it gains, when it starts, and how a study asks for it."""
import math

import numpy as np
import pytest
import yaml
from scipy import stats

from ccrig.analysis import readings, samples
from ccrig.analysis.claims import Claim
from ccrig.analysis.samples import ADJUST_MIN_N, from_reps
from ccrig.analysis.verdicts import Archive, evaluate
from ccrig.experiments.run.study_file import Study


def point(rng, n: int, r: float, mean: float = 5.0, skew: bool = False):
    """n repetitions whose value correlates with its loss drawn by r (the draw's mean 0, as a Bernoulli loss's
    dropped - p x offered over offered); skew: the rest of the spread lognormal, not normal."""
    z = rng.normal(0.0, 1.0, n)
    if skew:   # lognormal(0, 0.5) scaled to mean 0 and variance 1
        rest = (rng.lognormal(0.0, 0.5, n) - math.exp(0.125)) / math.sqrt((math.exp(0.25) - 1) * math.exp(0.25))
    else:
        rest = rng.normal(0.0, 1.0, n)
    values = mean + r * z + math.sqrt(1 - r * r) * rest
    return dict(enumerate(values)), dict(enumerate(0.002 * z))


def half_width(e) -> float:
    return stats.t.ppf(0.975, e.df) * e.se


def coverage(seed: int, n: int, r: float, skew: bool, adjust: bool, runs: int = 3000) -> float:
    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(runs):
        values, drawn = point(rng, n, r, skew=skew)
        e = from_reps("p", values, drawn=drawn if adjust else None)
        assert e.parts[0].lost_df == (2 if adjust else 1)
        covered += abs(e.mean - 5.0) <= half_width(e)
    return covered / runs


@pytest.mark.parametrize("n,r", [(8, 0.7), (15, 0.7), (30, 0.0)])
def test_the_adjusted_interval_covers_the_points_value_95_percent_of_the_time(n, r):
    # Monte-Carlo margin: 3000 runs put a true 95 % within ±1.0 % (2.5 standard errors) of what is seen
    assert abs(coverage(n, n, r, False, True) - 0.95) < 0.01


def test_with_skewed_residuals_it_covers_as_a_plain_mean_of_the_same_shape_does():
    # Student's t under-covers a skewed spread at 15 repetitions (lognormal, sigma 0.5: 92.5 % for both, seen);
    # the adjustment leaves its residual to the same test, so it keeps the plain mean's coverage, no less
    adjusted, plain = coverage(15, 15, 0.7, True, True), coverage(16, 15, 0.0, True, False)
    assert abs(adjusted - plain) < 0.017, (adjusted, plain)


def test_the_adjustment_narrows_the_interval_where_the_draw_explains_the_spread():
    rng = np.random.default_rng(3)
    plain, adjusted = [], []
    for _ in range(2000):
        values, drawn = point(rng, 15, 0.7)
        plain.append(half_width(from_reps("p", values)))
        adjusted.append(half_width(from_reps("p", values, drawn=drawn)))
    # sqrt(1 - 0.49) = 0.71 less the degree of freedom: 0.74 seen
    assert np.mean(adjusted) / np.mean(plain) < 0.8, np.mean(adjusted) / np.mean(plain)


def test_fewer_than_the_minimum_repetitions_are_a_plain_mean():
    rng = np.random.default_rng(4)
    values, drawn = point(rng, ADJUST_MIN_N - 1, 0.9)
    e = from_reps("p", values, drawn=drawn)
    assert e.parts[0].lost_df == 1 and e.mean == pytest.approx(np.mean(list(values.values())))
    values, drawn = point(rng, ADJUST_MIN_N, 0.9)
    assert from_reps("p", values, drawn=drawn).parts[0].lost_df == 2
    # a repetition without its draw (recorded before it was) leaves the point plain
    del drawn[0]
    assert from_reps("p", values, drawn=drawn).parts[0].lost_df == 1


def test_a_ratio_at_one_point_is_adjusted_again_as_a_whole():
    rng = np.random.default_rng(5)
    values, drawn = point(rng, 12, 0.8)
    other = {r: 2.0 + 0.1 * x for r, x in values.items()}
    a, b = from_reps("p", values, drawn=drawn), from_reps("p", other, drawn=drawn)
    q = samples.ratio(a, b)
    fit = stats.linregress(list(drawn.values()), [values[r] / other[r] for r in values])
    assert q.parts[0].lost_df == 2 and q.mean == pytest.approx(fit.intercept)
    assert q.se == pytest.approx(fit.intercept_stderr)
    assert samples.scale(a, 2.0).drawn == a.drawn


def test_the_loss_drawn_counts_the_bernoulli_drop_points_only():
    before = {"r2->d1": {"dropped": 10, "passed": 90, "p": 0.1}, "r1->r2 (ingress)": {"dropped": 0, "passed": 0}}
    after = {"r2->d1": {"dropped": 120, "passed": 980, "p": 0.1},
             "r1->r2 (ingress)": {"dropped": 0, "passed": 0, "down_dropped": 40},
             "r2->d2": {"dropped": 50, "passed": 50}}   # no p: a loss an event changed
    assert readings.drawn_between(before, after) == pytest.approx((110 - 0.1 * 1000, 1000))
    assert readings.drawn_between(after, after) == (0.0, 0.0)
    assert readings.loss_drawn({"loss_drawn": {"value": 0.002, "offered": 1000}}) == 0.002
    assert readings.loss_drawn({"links": {"r2->d1": {"dropped": 1, "passed": 9, "p": 0.1}}}) is None


def _points(drawn_by_rep: dict, goodput: dict) -> list[dict]:
    reps = [{"rep": r, "system": {"goodput_bps": {"mean": goodput[r]}}, "loss_drawn": {"value": d, "offered": 1000},
             "fidelity": {"verdict": "ok"}} for r, d in drawn_by_rep.items()]
    return [{"index": 0, "params": {}, "system": {}, "flows": [], "repetitions": reps}]


def test_a_study_adjusts_the_metrics_it_names_and_the_basis_says_so():
    rng = np.random.default_rng(6)
    values, drawn = point(rng, 10, 0.8, mean=8e6)
    claim = Claim.model_validate({"id": "c", "paper": "p", "test": {
        "kind": "bound", "q": {"spec": "s", "metric": "goodput_bps"}, "op": ">", "value": 1e6}})
    pts = {"s": _points(drawn, values)}
    plain = evaluate(claim, Archive(pts))
    adjusted = evaluate(claim, Archive(pts, adjust=frozenset({"goodput_bps"})))
    assert "adjusted for the loss drawn at s#0" in adjusted.basis and "adjusted" not in plain.basis
    assert adjusted.judgement.mean != plain.judgement.mean


def test_a_study_naming_a_metric_no_claim_reads_is_refused_with_the_field():
    doc = {"name": "x", "title": "t", "specs": [{"spec": "s", "answers": "a"}], "adjust_for_loss": ["godput_bps"],
           "claims": [{"id": "c", "paper": "p", "test": {"kind": "bound", "q": {"spec": "s", "metric": "goodput_bps"},
                                                         "op": ">", "value": 1}}]}
    with pytest.raises(ValueError, match=r"adjust_for_loss: 'godput_bps' is no metric a claim reads; expected some "
                                         r"of goodput_bps"):
        Study.model_validate(doc)
