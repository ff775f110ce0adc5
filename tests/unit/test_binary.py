"""A share of repetitions (a quantity with `exceeds`, analysis/binary.py): each repetition a Bernoulli trial, the
share's interval Clopper-Pearson's, exact at any n, where the t interval over 0s and 1s under-covers."""
import numpy as np
import pytest
from scipy import stats

from ccrig.analysis import binary, samples
from ccrig.analysis.claims import Claim
from ccrig.analysis.samples import from_reps
from ccrig.analysis.sequential import Design, Rule, judge
from ccrig.analysis.verdicts import Archive, evaluate

ONE_LOOK = Design(max_looks=1)


def upper(k: int, n: int, level: float = 0.99) -> float:
    """Clopper-Pearson's upper bound on a rate seen k times in n (the Monte-Carlo's own uncertainty)."""
    return 1.0 if k >= n else float(stats.beta.ppf(level, k + 1, n - k))


def test_the_interval_is_clopper_pearsons():
    assert binary.clopper_pearson(0, 6, 0.05) == (0.0, pytest.approx(1 - 0.025 ** (1 / 6)))
    low, high = binary.clopper_pearson(2, 10, 0.05)
    assert (low, high) == (pytest.approx(0.0252, abs=1e-4), pytest.approx(0.5561, abs=1e-4))
    assert binary.clopper_pearson(4, 4, 0.05)[1] == 1.0


@pytest.mark.parametrize("n", [3, 8])
def test_the_share_interval_covers_at_its_level(n):
    # a share near 0: most repetitions read 0, now and then one reads 1 (a run that dropped a packet)
    for p in (0.03, 0.15, 0.5):
        rng = np.random.default_rng(int(1000 * p) + n)
        runs, missed = 4000, 0
        for _ in range(runs):
            xs = {r: float(rng.random() < p) for r in range(n)}
            j = judge(from_reps("x", xs, (0.0, 1.0), binary=True), Rule(), 1, ONE_LOOK)
            missed += not j.low <= p <= j.high
        assert upper(missed, runs) < ONE_LOOK.alpha + 0.01, (p, missed)


def test_t_over_zeros_and_ones_under_covers_near_zero():
    # why the share has an interval of its own: t's interval over 8 draws of p = 0.15 (the same values, not
    # marked binary, and with their agreeing runs' flat bound left out: a plain t) misses p in about a quarter
    # of the runs (8 zeros, 27 % of them, give width 0 at 0), Clopper-Pearson's in under 5 %
    rng = np.random.default_rng(15)
    runs, missed_t, missed = 4000, 0, 0
    for _ in range(runs):
        xs = [float(rng.random() < 0.15) for _ in range(8)]
        mean, var = float(np.mean(xs)), float(np.var(xs, ddof=1))
        t = judge(samples.Estimate(mean, (samples.Part("x", 1.0, var, 8, mean),)), Rule(), 1, ONE_LOOK)
        missed_t += var > 0 and not t.low <= 0.15 <= t.high or var == 0
        j = judge(from_reps("x", dict(enumerate(xs)), (0.0, 1.0), binary=True), Rule(), 1, ONE_LOOK)
        missed += not j.low <= 0.15 <= j.high
    assert missed_t / runs > 0.2 and upper(missed, runs) < 0.06, (missed_t, missed)


def test_agreeing_repetitions_bound_a_share_one_repetition_sooner_than_a_value_found_in_the_data():
    # no repetition dropped anything; the claim: at most half of them drop (share <= 0.5)
    def at_most_half(n):
        e = samples.scale(from_reps("p", {r: 0.0 for r in range(n)}, (0.0, 1.0), binary=True), -1.0, 0.5)
        return judge(e, Rule(want=1, strict=False, margin=0.1), 1, ONE_LOOK)

    j = at_most_half(5)   # 1 - 0.025^(1/5) = 0.52
    assert j.verdict == "undecided" and j.needs == {"p": 5}, j
    assert "0 of 5 repetitions read 1" in j.basis and "Clopper-Pearson" in j.basis
    assert at_most_half(6).verdict == "holds"   # 0.46 (flat.py's bound for an unnamed value: 0.52)
    # one repetition in six that drops: its share's interval reaches 0.64, undecided; and a share that is high
    # fails
    e = samples.scale(from_reps("p", {0: 1.0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0}, (0.0, 1.0), binary=True), -1.0, 0.5)
    assert judge(e, Rule(want=1, strict=False, margin=0.1), 1, ONE_LOOK).verdict == "undecided"
    e = samples.scale(from_reps("p", dict.fromkeys(range(12), 1.0), (0.0, 1.0), binary=True), -1.0, 0.5)
    assert judge(e, Rule(want=1, strict=False, margin=0.1), 1, ONE_LOOK).verdict == "fails"


def test_a_binary_point_takes_only_ones_and_zeros():
    with pytest.raises(ValueError, match="read 1 or 0"):
        from_reps("p", {0: 0.5, 1: 0.0}, (0.0, 1.0), binary=True)


def _point(index, qdisc, losses):
    reps = [{"rep": r, "fidelity": {"verdict": "ok", "reasons": []}, "system": {"loss": {"mean": x}},
             "flows": [{"flow": 0}]} for r, x in enumerate(losses)]
    return {"index": index, "params": {"q": qdisc}, "system": {}, "flows": [{"flow": 0, "cc": "reno"}],
            "repetitions": reps}


def test_a_claim_on_how_often_a_repetition_drops_anything():
    claim = Claim.model_validate({"id": "c", "paper": "there are no dropped packets", "test": {
        "kind": "bound", "op": "<=", "value": 0.5, "margin": 0.1,
        "q": {"spec": "s1", "at": {"q": "pfifo"}, "metric": "loss", "exceeds": 0}}})
    # the mean loss of every repetition is 0: undecidable near 0 from [0, 1] (flat.py), decided as a share
    v = evaluate(claim, Archive({"s1": [_point(0, "pfifo", [0.0] * 6)]}))
    assert v.verdict == "holds" and "0 of 6 repetitions read 1" in v.basis, v
    # three of six dropped a little: the share is 0.5, its interval [0.12, 0.88]
    v = evaluate(claim, Archive({"s1": [_point(0, "pfifo", [0.0, 0.002, 0.0, 0.0001, 0.0, 0.01])]}))
    assert v.verdict == "undecided" and "3 of 6 repetitions read 1" in v.basis, v
    bad = Claim.model_validate({"id": "c", "paper": "p", "test": {
        "kind": "bound", "op": "<=", "value": 0.5,
        "q": {"spec": "s1", "metric": "pause_gain", "exceeds": 0}}})
    assert "exceeds reads one value a repetition" in bad.test.q.problem()
