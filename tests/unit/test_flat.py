"""A point whose repetitions all read the same value (analysis/flat.py): its bound is exact, from the metric's
range, and holds its coverage where the t interval of width 0 did not (Keshav's Telnet claims, runs A and B)."""
import math

import numpy as np
import pytest
from scipy import stats

from ccrig.analysis import flat, samples
from ccrig.analysis.claims import Claim
from ccrig.analysis.samples import from_reps
from ccrig.analysis.sequential import Design, Rule, judge
from ccrig.analysis.verdicts import Archive, evaluate

ONE_LOOK = Design(max_looks=1)


def upper(k: int, n: int, level: float = 0.99) -> float:
    """Clopper-Pearson's upper bound on a rate seen k times in n (the Monte-Carlo's own uncertainty)."""
    return 1.0 if k >= n else float(stats.beta.ppf(level, k + 1, n - k))


def telnet(rng, n: int, shut_out: float) -> dict[int, float]:
    """A Telnet's messages received / sent - 1 over n repetitions: 0 (every message through), except in a share
    `shut_out` of them, where it loses 60 % (as Keshav's s2 and s4 did now and then)."""
    return {r: (-0.6 if rng.random() < shut_out else 0.0) for r in range(n)}


@pytest.mark.parametrize("n", [3, 6, 12])
def test_agreeing_repetitions_no_longer_decide_no_difference_against_a_difference_beyond_the_margin(n):
    # FQ's Telnet always gets through, FCFS's is shut out in a quarter of the runs: a true difference of 0.15
    # against a margin of 0.1, so "no-difference" is the error (at most alpha / 2). The t interval alone decided
    # it whenever FCFS's repetitions all read 0: 0.75^n of the time (42 % at n = 3)
    rng = np.random.default_rng(40 + n)
    runs, wrong = 4000, 0
    for _ in range(runs):
        fq = from_reps("fq", telnet(rng, n, 0.0), (-1.0, 0.0))
        fcfs = from_reps("fcfs", telnet(rng, n, 0.25), (-1.0, 0.0))
        wrong += judge(samples.diff(fq, fcfs), Rule(margin=0.1), 1, ONE_LOOK).verdict == "no-difference"
    assert upper(wrong, runs) < ONE_LOOK.alpha / 2, wrong


def test_the_bound_covers_at_its_level_whatever_the_share_off_the_common_value():
    # one point, the claim "its mean is within 0.5 of ..." reduced to coverage: how often does the interval of an
    # all-agreeing sample miss the true mean? At most alpha over every share p of repetitions off the value
    for p in (0.05, 0.2, 0.5, 0.8):
        rng = np.random.default_rng(int(100 * p))
        runs, missed = 4000, 0
        for _ in range(runs):
            xs = {r: (1.0 if rng.random() < p else 0.0) for r in range(4)}
            e = from_reps("x", xs, (0.0, 1.0))
            j = judge(e, Rule(), 1, ONE_LOOK)
            missed += not j.low <= p <= j.high
        assert upper(missed, runs) < ONE_LOOK.alpha + 0.01, (p, missed)


def test_agreeing_repetitions_decide_once_there_are_enough_and_say_how_many_before():
    # loss exactly 0 in every repetition; the claim: loss <= 0.5 (margin 0.05)
    def loss_at_most_half(n):
        e = samples.scale(from_reps("p", {r: 0.0 for r in range(n)}, (0.0, 1.0)), -1.0, 0.5)
        return judge(e, Rule(want=1, strict=False, margin=0.05), 1, ONE_LOOK)

    j = loss_at_most_half(3)
    assert j.verdict == "undecided" and j.needs.get("p", 0) > 0, j
    assert "all read 0" in j.basis and "exact binomial bound" in j.basis
    # n - 1 >= log(0.05) / log(0.5) = 4.3: at 6 the share off 0 is below a half at 95 %
    assert loss_at_most_half(6).verdict == "holds"
    assert flat.deviating(6, 0.05) == pytest.approx(1 - 0.05 ** (1 / 5))


def test_a_quantity_without_a_bound_stays_undecided_and_says_why():
    e = samples.diff(from_reps("a", {0: 5.0, 1: 5.0, 2: 5.0}), from_reps("b", {0: 1.0, 1: 2.0, 2: 3.0}))
    j = judge(e, Rule(margin=0.5), 1, ONE_LOOK)
    assert j.verdict == "undecided" and j.low == -math.inf, j
    assert "no bound on one side" in j.basis


def test_a_spread_point_beside_a_flat_one_shares_the_looks_alpha():
    rng = np.random.default_rng(7)
    spread = from_reps("s", dict(enumerate(rng.normal(0.5, 0.05, 5))), (0.0, 1.0))
    agreeing = from_reps("f", {r: 0.0 for r in range(5)}, (0.0, 1.0))
    j = judge(samples.diff(spread, agreeing), Rule(), 1, ONE_LOOK)
    t_alone = judge(spread, Rule(), 1, ONE_LOOK)
    # the t part at 97.5 % (half the look's alpha) is wider than at 95 %, and the flat part adds 0 below its
    # value 0 (its range starts there) and its share of [0, 1] above
    assert j.high - j.mean > t_alone.high - t_alone.mean
    assert j.mean - j.low > (t_alone.mean - t_alone.low) + 0.9 * flat.deviating(5, 0.025) - 1e-9


def _telnet_point(index, qdisc, values):
    reps = [{"rep": r, "fidelity": {"verdict": "ok", "reasons": []}, "system": {}, "flows": [{"flow": 0}],
             "interactive": [{"flow": 0, "sender_vs_receiver": v}]} for r, v in enumerate(values)]
    return {"index": index, "params": {"q": qdisc}, "system": {}, "flows": [{"flow": 0, "cc": "reno"}],
            "repetitions": reps}


def test_a_telnet_claim_whose_repetitions_all_deliver_everything_is_undecided_not_no_difference():
    # Keshav's s2-jk-fq-telnet-throughput in run A: every repetition of both points read 0
    claim = Claim.model_validate({"id": "c", "paper": "FQ gives the Telnets full throughput", "test": {
        "kind": "compare", "op": ">", "margin": 0.1,
        "a": {"spec": "s2", "at": {"q": "fq"}, "flows": [0], "metric": "interactive.sender_vs_receiver"},
        "b": {"spec": "s2", "at": {"q": "pfifo"}, "flows": [0], "metric": "interactive.sender_vs_receiver"}}})
    archive = Archive({"s2": [_telnet_point(0, "pfifo", [0.0] * 3), _telnet_point(1, "fq", [0.0] * 3)]})
    v = evaluate(claim, archive)
    assert v.verdict == "undecided", v
    assert "[-1, 0]" in v.basis and v.to_dict()["interval"][0] < -0.5
    # a run long enough to bound both points within the margin decides it: no difference
    archive = Archive({"s2": [_telnet_point(0, "pfifo", [0.0] * 200), _telnet_point(1, "fq", [0.0] * 200)]})
    assert evaluate(claim, archive).verdict == "no-difference"


def test_an_interval_is_cut_to_the_quantitys_range_and_a_value_outside_it_widens_the_range():
    # loss in one repetition of three: the t interval reaches below 0, where no mean can be
    e = from_reps("p", {0: 0.0, 1: 0.0, 2: 0.003}, (0.0, 1.0))
    j = judge(e, Rule(), 1, ONE_LOOK)
    assert j.low == 0.0 and j.high == pytest.approx(0.001 + 4.303 * 0.001, rel=1e-3), j
    assert "cut to the quantity's range" in j.basis
    # the same through a claim's transformation (loss <= 0.01: 0.01 - loss > 0) and a difference of points
    j = judge(samples.scale(e, -1.0, 0.01), Rule(strict=False), 1, ONE_LOOK)
    assert j.high == pytest.approx(0.01) and j.verdict == "holds"
    d = samples.diff(e, from_reps("q", {0: 0.5, 1: 0.6, 2: 0.7}, (0.0, 1.0)))
    assert d.bounds == (-1.0, 1.0)
    # a declared range that a value leaves was wrong: it widens rather than cut the truth off
    assert from_reps("r", {0: 1.2, 1: 0.9}, (0.0, 1.0)).bounds == (0.0, 1.2)
