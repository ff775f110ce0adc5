"""The warm-up checked by a measurement: a point whose goodput still drifts after it is named (analysis/settling.py),
at most the test's error rate of the stationary ones are, and only where the spec means the goodput to be steady."""
import numpy as np
import pytest

from ccrig.analysis import settling
from ccrig.experiments import spec as specmod
from ccrig.experiments.run import summary

SPEC = {"name": "settle", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt"}},
        "duration": "30s", "warmup": 5, "flows": [{"count": 4, "cc": "reno"}]}


def decay(seed: int, n: int = 30, tail: float = 2e6, start: float = 6e6, tau: float = 8.0) -> list[float]:
    """Study 001's smooth TCP at PER 0.1 in shape: slow start's overshoot coming down over tens of seconds."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return list(tail + (start - tail) * np.exp(-t / tau) + rng.normal(0, 0.1 * tail, n))


def test_a_transient_longer_than_the_warm_up_is_named_with_its_size_and_the_way_out():
    record = settling.drift([decay(s) for s in range(3)], warmup=5)
    assert record["repetitions"] == 3 and not record["settled"]
    assert record["p"] < settling.LEVEL and record["drift"] > 0.3   # the first half well above the second
    text = settling.problem(record)
    assert "still settling after the warm-up of 5 intervals" in text and "fell by" in text
    assert ", t over 3 repetitions" in text and "lengthen warmup" in text
    # a shorter transient (time constant 5 s) behind a warm-up of 20 (4 time constants) and a window of 20: settled
    later = settling.drift([decay(s, n=40, tau=5.0) for s in range(3)], warmup=20)
    assert later["settled"] and settling.problem(later) is None


@pytest.mark.parametrize("spread", [0.3e6, 1.0e6])
def test_stationary_goodput_is_named_at_most_at_the_tests_error_rate(spread):
    """Under no drift (AR(1) noise within a run, as interval means are: lag-1 0.7), the share of points named
    stays at the t test's LEVEL or below (2000 simulated points of three repetitions, 0.01 for the simulation's
    own error): a noisy point (20 % an interval) is named at about LEVEL (here 0.045), a quieter one (6 %) far
    less, its halves seldom SHARE apart (0.003)."""
    rng = np.random.default_rng(7)
    named = 0
    trials = 2000
    for _ in range(trials):
        series = []
        for _ in range(3):
            e = rng.normal(0, 1, 30)
            x = np.empty(30)
            x[0] = e[0]
            for i in range(1, 30):
                x[i] = 0.7 * x[i - 1] + e[i]
            series.append(list(5e6 + spread * x))
        named += not settling.drift(series, warmup=5)["settled"]
    assert named / trials <= settling.LEVEL + 0.01


def test_too_few_repetitions_or_intervals_say_nothing_and_a_faults_intervals_are_left_out():
    assert settling.drift([decay(0), decay(1)], warmup=5) is None          # two: t would need a drift of 12.7 se
    assert settling.drift([decay(s, n=8) for s in range(3)], warmup=5) is None   # 3 intervals: no halves
    with_fault = [decay(s) for s in range(3)]
    with_fault[1][10:14] = [None] * 4   # the kernel fault's intervals (summary.json series: none)
    assert settling.drift(with_fault, warmup=5)["repetitions"] == 3
    assert settling.drift([[]] * 3, warmup=5) is None                     # an older archive: no series


HANDOFF = {"kind": "down", "link": "r1-r2", "at": "6s", "for": "0.2s", "every": "10s"}


@pytest.mark.parametrize("change, window", [
    ({}, (5, None, 1)),
    ({"flows": [{"count": 4, "cc": "reno", "stop": "20s"}]}, None),          # contention that decreases
    ({"flows": [{"count": 4, "cc": "reno", "start": "10s"}]}, None),         # enters after the warm-up
    ({"flows": [{"count": 4, "cc": "reno", "start": "3s"}]}, (5, None, 1)),  # enters inside it
    ({"flows": [{"workload": {"kind": "onoff", "rate": "5mbit", "on": "2s", "off": "2s"}}]}, None),
    # handoffs every 10 s from 6 s (study 001): the periods 6-16 and 16-26 s, the last one cut by the run's end
    ({"events": [HANDOFF]}, (6, 26, 10)),
    ({"events": [{**HANDOFF, "at": "2s"}], "duration": "40s"}, (12, 32, 10)),  # the first period in the warm-up
    ({"events": [HANDOFF], "duration": "20s"}, None),                          # one whole period: no halves
    ({"events": [{**HANDOFF, "every": "2.5s"}]}, None),                      # periods across interval boundaries
    ({"events": [HANDOFF, {**HANDOFF, "every": "7s"}]}, None),                 # two periods
    ({"events": [{**HANDOFF, "every": None}]}, None),                          # once
])
def test_only_a_point_meant_to_be_steady_is_tested_and_a_periodic_one_period_by_period(change, window):
    raw = {**SPEC, **change}
    exp = specmod.validate(raw, "spec.yaml")
    assert summary.steady_window(exp) == window
    reps = [{"system": {}, "flows": [], "t_max_bps": 1e7, "fair_share_bps": 1e6,
             "series": {"goodput_bps": decay(s, n=exp.n_intervals)}}
            for s in range(3)]
    point = summary.point(specmod.points(raw, exp)[0], reps)
    assert ("settling" in point) is (window is not None)
    assert any("still settling" in x for x in point["measurement_problems"]) is (window is not None)


def handoffs(seed: int, tau: float | None) -> list[float]:
    """Study 001's handoff points in shape: every 10 s from 6 s the link goes down, goodput drops to a third and
    climbs back over the period; tau: an envelope still coming down (slow start's window), None: none."""
    rng = np.random.default_rng(seed)
    t = np.arange(30)
    since = (t - 6) % 10
    shape = np.where(t < 6, 1.0, 0.35 + 0.065 * since)
    envelope = 1.0 if tau is None else 1 + 1.5 * np.exp(-t / tau)
    return list(8e6 * shape * envelope + rng.normal(0, 0.3e6, 30))


def test_a_periodic_point_is_tested_over_whole_periods():
    window = (6, 26, 10)
    steady = settling.drift([handoffs(s, None) for s in range(3)], warmup=5, window=window)
    assert steady["settled"] and abs(steady["drift"]) < 0.05 and steady["block"] == 10
    assert "whole periods of 10 intervals from interval 6 to 26" in steady["method"]
    # the same series halved interval by interval (5-17 against 18-30) compare a period's start with another's
    # end: the sawtooth alone reads as a drift
    assert abs(settling.drift([handoffs(s, None) for s in range(3)], warmup=5)["drift"]) > abs(steady["drift"])
    late = settling.drift([handoffs(s, 8.0) for s in range(3)], warmup=5, window=window)
    assert not late["settled"] and late["drift"] > 0.2
    # a fault's intervals leave their period in place; a period with most of its intervals gone leaves the repetition
    faulted = [handoffs(s, None) for s in range(3)]
    faulted[0][8:11] = [None] * 3
    assert settling.drift(faulted, warmup=5, window=window)["repetitions"] == 3
    faulted[0][16:23] = [None] * 7
    assert settling.drift(faulted, warmup=5, window=window) is None


def test_a_claim_read_at_a_point_still_settling_keeps_its_verdict_and_says_so():
    from ccrig.analysis.claims import Claim
    from ccrig.analysis.verdicts import Archive, evaluate
    late = settling.drift([decay(s) for s in range(3)], warmup=5)
    steady = {**late, "settled": True}

    def pt(index, law, values, settle):
        reps = [{"rep": r, "fidelity": {"verdict": "ok", "reasons": []},
                 "system": {"goodput_bps": {"mean": v, "ci95": None, "ci": {"method": "batches"}}}, "flows": []}
                for r, v in enumerate(values)]
        return {"index": index, "params": {"flows[0].cc": law}, "system": {}, "flows": [], "repetitions": reps,
                "settling": settle}
    points = [pt(0, "ab_responsive", [1.9e6, 1.92e6, 1.94e6], steady), pt(1, "ab_smooth", [3.0e6, 3.6e6, 4.1e6], late)]
    q = lambda law: {"spec": "per", "at": {"flows[0].cc": law}}
    c = Claim.model_validate({"id": "f4", "paper": "responsive above smooth", "test": {
        "kind": "compare", "a": q("ab_responsive"), "op": ">", "b": q("ab_smooth")}})
    v = evaluate(c, Archive({"per": points}))
    assert v.verdict == "fails"   # the verdict is the repetitions' as before
    assert "was still settling after the warm-up" in v.basis and "per#1 (its goodput fell by" in v.basis
    assert "per#0" not in v.basis.split("warm-up")[-1]
