"""A study's claims (analysis/claims.py): quantities read from summary points' repetitions, and every test's
verdicts (holds, fails, no-difference, undecided, not-applicable) on independent repetitions only."""
import copy

import pytest
from pydantic import ValidationError

from ccrig.analysis.claims import Claim
from ccrig.analysis.sequential import Design
from ccrig.analysis.verdicts import Archive, evaluate


def stat(mean):
    return {"mean": mean, "ci95": None, "ci": {"method": "batches"}}


def point(index, params, system, flows=(), reps=None, **extra):
    """A summary point whose repetitions carry the given values: system {metric: [one value per repetition]},
    flows [(cc, {metric: [...]})]; the point's own means are the repetitions' (what claims no longer read)."""
    n = reps or len(next(iter(system.values())))
    repetitions = [{"rep": r, "fidelity": {"verdict": "ok", "reasons": []},
                    "system": {k: stat(v[r]) for k, v in system.items()},
                    "flows": [{"flow": i, **{k: stat(v[r]) for k, v in m.items()}} for i, (_, m) in enumerate(flows)]}
                   for r in range(n)]
    avg = lambda v: sum(v) / len(v)
    return {"index": index, "params": params, "system": {k: stat(avg(v)) for k, v in system.items()},
            "flows": [{"flow": i, "cc": cc, **{k: stat(avg(v)) for k, v in m.items()}}
                      for i, (cc, m) in enumerate(flows)],
            "repetitions": repetitions, **extra}


def claim(test, id="c"):
    return Claim.model_validate({"id": id, "paper": "says so", "test": test})


def around(x, d=0.1):
    """Three repetitions' values around x."""
    return [x - d, x, x + d]


# a malicious source (flow 2) against two well-behaved ones, under FCFS and FQ
S4 = [point(0, {"q": "pfifo"}, {"goodput_bps": around(9.0), "jain": around(0.4, 0.02)},
            [("reno", {"goodput_bps": around(0.5)}), ("reno", {"goodput_bps": around(0.4)}),
             ("none", {"goodput_bps": around(8.1, 0.2)})]),
      point(1, {"q": "fq"}, {"goodput_bps": around(9.0), "jain": around(0.98, 0.01)},
            [("reno", {"goodput_bps": [2.9, 3.1, 3.0]}), ("reno", {"goodput_bps": [3.1, 2.9, 3.0]}),
             ("none", {"goodput_bps": around(3.0)})])]


def test_bound_on_a_share_holds_beyond_its_interval():
    a = Archive({"s4": S4})
    v = evaluate(claim({"kind": "bound", "op": ">=", "value": 0.8,
                        "q": {"spec": "s4", "at": {"q": "pfifo"}, "flows": [2], "share": True}}), a)
    assert v.verdict == "holds" and "t over repetitions (n ≥ 3)" in v.basis
    assert v.values["q"]["mean"] == pytest.approx(0.9, abs=1e-3)
    d = v.to_dict()
    assert d["interval"][0] > 0 and d["level"] == pytest.approx(0.95) and d["alpha_spent"] == pytest.approx(0.05)
    v = evaluate(claim({"kind": "bound", "op": ">=", "value": 0.8,
                        "q": {"spec": "s4", "at": {"q": "fq"}, "flows": [2], "share": True}}), a)
    assert v.verdict == "fails"


def test_compare_and_undecided_when_the_interval_covers_both_sides():
    a = Archive({"s4": S4})
    fq = {"spec": "s4", "at": {"q": "fq"}, "metric": "jain"}
    fcfs = {"spec": "s4", "at": {"q": "pfifo"}, "metric": "jain"}
    assert evaluate(claim({"kind": "compare", "a": fq, "op": ">", "b": fcfs}), a).verdict == "holds"
    assert evaluate(claim({"kind": "compare", "a": fcfs, "op": ">", "b": fq}), a).verdict == "fails"
    # flows 0 and 1 under FQ: the same on average, paired within each repetition
    f0 = {"spec": "s4", "at": {"q": "fq"}, "flows": [0]}
    f1 = {"spec": "s4", "at": {"q": "fq"}, "flows": [1]}
    v = evaluate(claim({"kind": "compare", "a": f0, "op": ">", "b": f1}), a)
    assert v.verdict == "undecided" and "the means are equal and the claim has no margin" in v.basis
    # the same with a margin of 20 %: equivalence is decided
    v = evaluate(claim({"kind": "compare", "a": f0, "op": ">", "b": f1, "margin": "20%"}), a)
    assert v.verdict == "no-difference" and v.margin == pytest.approx(0.6)


def test_a_margin_too_narrow_says_how_many_more_repetitions():
    f0 = {"spec": "s4", "at": {"q": "fq"}, "flows": [0]}
    f1 = {"spec": "s4", "at": {"q": "fq"}, "flows": [1]}
    v = evaluate(claim({"kind": "compare", "a": f0, "op": ">", "b": f1, "margin": 0.2}), Archive({"s4": S4}))
    assert v.verdict == "undecided" and "needs ~" in v.basis
    assert set(v.judgement.needs) == {"s4#1"} and v.judgement.needs["s4#1"] > 0


def test_flows_by_cc_average_and_sum():
    a = Archive({"s4": S4})
    q = {"spec": "s4", "at": {"q": "pfifo"}, "flows": {"cc": "reno"}, "agg": "sum"}
    v = evaluate(claim({"kind": "within", "q": q, "value": 0.9, "tol": 0.01}), a)
    assert v.values["q"]["mean"] == pytest.approx(0.9)
    assert v.verdict == "undecided"   # 0.9 ± 0.5 (the sums 0.7, 0.9, 1.1) against a tolerance of 0.009
    q["agg"] = "mean"
    v = evaluate(claim({"kind": "within", "q": q, "value": 3.0, "tol": 0.1}), a)
    assert v.verdict == "fails" and v.values["q"]["mean"] == pytest.approx(0.45)


# study 001's shape: the responsive law's advantage over the smooth one shrinks as the loss rises
PER = [point(i, {"loss": per, "cc": cc}, {"goodput_bps": around(g, h)})
       for i, (per, cc, g, h) in enumerate([(0.01, "resp", 8.0, 0.2), (0.01, "smooth", 6.0, 0.2),
                                            (0.1, "resp", 3.0, 0.2), (0.1, "smooth", 2.9, 0.2),
                                            (0.4, "resp", 0.5, 0.05), (0.4, "smooth", 0.6, 0.05)])]


def test_trend_of_a_ratio_along_a_sweep():
    a = Archive({"alphabeta": PER})
    ratio = {"ratio": [{"spec": "alphabeta", "at": {"cc": "resp"}}, {"spec": "alphabeta", "at": {"cc": "smooth"}}]}
    v = evaluate(claim({"kind": "trend", "q": ratio, "along": "loss", "sign": "falls"}), a)
    assert v.verdict == "holds", v
    assert [x for x, _ in v.values["series"]] == ["0.01", "0.1", "0.4"]
    assert evaluate(claim({"kind": "trend", "q": ratio, "along": "loss", "sign": "rises"}), a).verdict == "fails"


def test_not_applicable_when_a_point_was_not_run():
    quick = Archive({"alphabeta": PER[:1], "other": None})
    ratio = {"ratio": [{"spec": "alphabeta", "at": {"cc": "resp"}}, {"spec": "alphabeta", "at": {"cc": "smooth"}}]}
    v = evaluate(claim({"kind": "trend", "q": ratio, "along": "loss", "sign": "falls"}), quick)
    assert v.verdict == "not-applicable" and "fewer than two points" in v.basis
    v = evaluate(claim({"kind": "bound", "q": {"spec": "other"}, "op": ">", "value": 0}), quick)
    assert v.verdict == "not-applicable" and "not run" in v.basis
    # its one point spoiled too (a busy machine): still no trend to see, not a point to measure again
    spoiled = copy.deepcopy(PER[:1])
    for rep in spoiled[0]["repetitions"]:
        rep["fidelity"] = {"verdict": "testbed-limited", "reasons": ["the bottleneck dequeued 0.86 of its rate"]}
    v = evaluate(claim({"kind": "trend", "q": {"spec": "alphabeta", "at": {"cc": "resp"}}, "along": "loss",
                        "sign": "falls"}), Archive({"alphabeta": spoiled}))
    assert v.verdict == "not-applicable" and "fewer than two points along loss were run" in v.basis, v
    v = evaluate(claim({"kind": "bound", "q": {"spec": "alphabeta", "at": {"cc": "smooth"}}, "op": ">",
                        "value": 0}), quick)
    assert v.verdict == "not-applicable" and "no point" in v.basis


def test_a_point_the_budget_cut_before_it_ran_leaves_its_claims_undecided_not_not_applicable():
    # runner.cut_short leaves out a point with no pair run; not-applicable would count the claim as decided
    cut = Archive({"alphabeta": PER[:1], "other": None}, cut={"alphabeta": 5, "other": 3})
    ratio = {"ratio": [{"spec": "alphabeta", "at": {"cc": "resp"}}, {"spec": "alphabeta", "at": {"cc": "smooth"}}]}
    v = evaluate(claim({"kind": "trend", "q": ratio, "along": "loss", "sign": "falls"}), cut)
    assert (v.verdict, v.basis) == ("undecided", "alphabeta: fewer than two points along loss were run before the "
                                                 "budget ended (5 pair(s) of it left to run)")
    v = evaluate(claim({"kind": "bound", "q": {"spec": "other"}, "op": ">", "value": 0}), cut)
    assert (v.verdict, v.basis) == ("undecided", "other: no point was run before the budget ended (3 pair(s) of it "
                                                 "left to run)")
    v = evaluate(claim({"kind": "bound", "q": {"spec": "alphabeta", "at": {"cc": "smooth"}}, "op": ">",
                        "value": 0}), cut)
    assert v.verdict == "undecided" and "no point with cc=smooth was run before the budget ended" in v.basis
    # a point that ran and failed is not the budget's doing
    failed = Archive({"alphabeta": [{**PER[0], "repetitions": []}]}, cut={"alphabeta": 5})
    v = evaluate(claim({"kind": "bound", "q": {"spec": "alphabeta", "at": {"cc": "resp"}}, "op": ">",
                        "value": 0}), failed)
    assert v.verdict == "not-applicable", v


def test_a_point_whose_repetitions_all_failed_is_not_applicable():
    failed = {"index": 3, "params": {"q": "red"}, "failed": "tc: RED: failed to calculate EWMA constant",
              "repetitions": []}
    v = evaluate(claim({"kind": "bound", "q": {"spec": "s4", "at": {"q": "red"}, "flows": [0]}, "op": ">",
                        "value": 0}), Archive({"s4": [*S4, failed]}))
    assert v.verdict == "not-applicable" and "no finished repetition (tc: RED" in v.basis


def test_ambiguous_point_is_said():
    v = evaluate(claim({"kind": "bound", "q": {"spec": "alphabeta", "at": {"loss": 0.01}}, "op": ">", "value": 0}),
                 Archive({"alphabeta": PER}))
    assert v.verdict == "not-applicable" and "2 points match" in v.basis


def test_jain_over_a_subset_of_flows_in_each_repetition():
    # under FCFS the two renos share alike between themselves, whatever the hog takes
    q = {"spec": "s4", "at": {"q": "pfifo"}, "flows": [0, 1], "metric": "jain"}
    v = evaluate(claim({"kind": "bound", "q": q, "op": ">=", "value": 0.9}), Archive({"s4": S4}))
    per_rep = [(a + b) ** 2 / (2 * (a * a + b * b)) for a, b in zip(around(0.5), around(0.4))]
    assert v.values["q"]["mean"] == pytest.approx(sum(per_rep) / 3) and v.verdict == "holds"
    q["flows"] = [0, 2]
    assert evaluate(claim({"kind": "bound", "q": q, "op": ">=", "value": 0.9}), Archive({"s4": S4})).verdict == "fails"


def test_one_repetition_is_undecided_never_judged_on_its_mean():
    a = Archive({"x": [point(0, {}, {"goodput_bps": [5.0]})]})
    v = evaluate(claim({"kind": "bound", "q": {"spec": "x"}, "op": ">", "value": 4}), a)
    assert v.verdict == "undecided" and "needs at least 2" in v.basis and v.judgement.needs == {"x#0": 1}


def test_spoiled_repetitions_are_left_out_and_recorded():
    p = point(0, {}, {"goodput_bps": [5.0, 5.1, 4.9, 0.1, 0.2, 0.3]}, [("reno", {"goodput_bps": [1.0] * 6})])
    reps = p["repetitions"]
    reps[3]["fidelity"] = {"verdict": "testbed-limited", "reasons": ["a CPU core was 99% busy"]}
    reps[4]["kernel_fault"] = [{"flow": 0, "excluded_samples": 40, "samples": 500}]
    reps[5]["cross_check"] = [{"flow": 0, "collector_vs_iperf3": -0.2}]
    v = evaluate(claim({"kind": "bound", "q": {"spec": "x"}, "op": ">", "value": 4}), Archive({"x": [p]}))
    assert v.verdict == "holds" and v.values["q"]["n"] == 3 and v.values["q"]["mean"] == pytest.approx(5.0)
    reasons = {e["rep"]: e["reason"] for e in v.excluded}
    assert set(reasons) == {3, 4, 5} and all(e["point"] == "x#0" for e in v.excluded)
    assert reasons[3].startswith("fidelity testbed-limited") and reasons[4].startswith("kernel_fault")
    assert reasons[5].startswith("collector disagreement")


def test_a_point_whose_every_repetition_was_left_out_leaves_its_claims_undecided():
    """It ran and was not measured (study 000 under 16 % steal: three attempts, each testbed-limited): the claim
    applies, so it is undecided, not not-applicable; a trend with too few measured points too."""
    spoiled = copy.deepcopy(PER)
    for i in (0, 1):
        for rep in spoiled[i]["repetitions"]:
            rep["fidelity"] = {"verdict": "testbed-limited", "reasons": ["delay line d1->n2: late (p99)"]}
    a = Archive({"alphabeta": spoiled})
    v = evaluate(claim({"kind": "bound", "q": {"spec": "alphabeta", "at": {"cc": "resp", "loss": 0.01}}, "op": ">",
                        "value": 0}), a)
    assert v.verdict == "undecided" and "no usable repetition (fidelity testbed-limited: delay line" in v.basis, v
    assert len(v.excluded) == 3
    ratio = {"ratio": [{"spec": "alphabeta", "at": {"cc": "resp"}}, {"spec": "alphabeta", "at": {"cc": "smooth"}}]}
    two = Archive({"alphabeta": spoiled[:4]})   # of its two loss rates, 0.01 was not measured
    v = evaluate(claim({"kind": "trend", "q": ratio, "along": "loss", "sign": "falls"}), two)
    assert v.verdict == "undecided" and "fewer than two points along loss have a usable repetition" in v.basis, v
    # with a third, measured, point the final look reads the two it has
    v = evaluate(claim({"kind": "trend", "q": ratio, "along": "loss", "sign": "falls"}), a, final=True)
    assert [x for x, _ in v.values["series"]] == ["0.1", "0.4"], v


def test_an_unmeasured_point_asks_the_first_pass_again_while_a_look_follows():
    """Its claim's judgement asks k0 repetitions at the points not measured, for the budget loop to fund (and
    to price: next_pairs funds a claim by its needs alone); at the final look, or for a cut point, none."""
    from ccrig.analysis.allocation import next_pairs
    spoiled = copy.deepcopy(PER)
    for rep in spoiled[0]["repetitions"] + spoiled[1]["repetitions"]:
        rep["fidelity"] = {"verdict": "testbed-limited", "reasons": ["delay line d1->n2: late (p99)"]}
    d = Design(k0=3, max_looks=3)
    bound = claim({"kind": "bound", "q": {"spec": "alphabeta", "at": {"cc": "resp", "loss": 0.01}}, "op": ">",
                   "value": 0})
    v = evaluate(bound, Archive({"alphabeta": spoiled}), look=1, design=d)
    assert v.verdict == "undecided" and v.to_dict()["needs"] == {"alphabeta#0": 3}, v
    assert next_pairs([v.judgement], 100.0, {"alphabeta#0": 5.0}) == [("alphabeta#0", 3)]
    ratio = {"ratio": [{"spec": "alphabeta", "at": {"cc": "resp"}}, {"spec": "alphabeta", "at": {"cc": "smooth"}}]}
    v = evaluate(claim({"kind": "trend", "q": ratio, "along": "loss", "sign": "falls"}),
                 Archive({"alphabeta": spoiled[:4]}), look=1, design=d)
    # both operands of the ratio were spoiled: the look asks the first pass again at each, not at the first only
    assert v.verdict == "undecided" and v.judgement.needs == {"alphabeta#0": 3, "alphabeta#1": 3}, v
    compare = claim({"kind": "compare", "a": {"spec": "alphabeta", "at": {"cc": "resp", "loss": 0.01}},
                     "b": {"spec": "alphabeta", "at": {"cc": "smooth", "loss": 0.01}}, "op": ">"})
    v = evaluate(compare, Archive({"alphabeta": spoiled[:4]}), look=1, design=d)
    assert v.verdict == "undecided" and v.judgement.needs == {"alphabeta#0": 3, "alphabeta#1": 3}, v
    assert evaluate(bound, Archive({"alphabeta": spoiled}), look=3, design=d, final=True).judgement is None


def test_a_trend_with_an_unmeasured_point_is_measured_again_there_then_judged_without_it():
    """A trend reads its whole axis: while a look follows, a middle point whose every repetition was spoiled leaves
    the claim undecided and asks the first pass there again; at the final look the others are judged, and the
    basis says which point was left out."""
    spoiled = copy.deepcopy(PER)
    for rep in spoiled[2]["repetitions"]:
        rep["fidelity"] = {"verdict": "testbed-limited", "reasons": ["delay line d1->n2: late (p99)"]}
    d = Design(k0=3, max_looks=3)
    falls = claim({"kind": "trend", "q": {"spec": "alphabeta", "at": {"cc": "resp"}}, "along": "loss",
                   "sign": "falls"})
    v = evaluate(falls, Archive({"alphabeta": spoiled}), look=1, design=d)
    assert v.verdict == "undecided" and v.judgement.needs == {"alphabeta#2": 3}, v
    assert "1 of 3 points along loss have no usable repetition yet" in v.basis
    v = evaluate(falls, Archive({"alphabeta": spoiled}), look=3, design=d, final=True)
    assert v.verdict == "holds" and [x for x, _ in v.values["series"]] == ["0.01", "0.4"], v
    assert "judged without 1 point(s): alphabeta point 2: no usable repetition" in v.basis


def test_looks_spend_alpha():
    a = Archive({"s4": S4})
    f0 = {"spec": "s4", "at": {"q": "fq"}, "flows": [2], "share": True}
    test = {"kind": "bound", "q": f0, "op": ">", "value": 0.3}
    first = evaluate(claim(test), a, look=1, design=Design(max_looks=3))
    assert first.verdict == "undecided" and first.judgement.alpha_spent < 0.001   # O'Brien-Fleming: little early
    assert evaluate(claim(test), a, look=1, design=Design(max_looks=1)).verdict == "holds"


def test_same_trend_against_a_model_and_the_pause_gain():
    def with_baseline(i, rtt, g):
        p = point(i, {"rtt": rtt}, {"goodput_bps": around(1 + g / 100, 0.005)})
        p["without_pause"] = point(i, {"rtt": rtt}, {"goodput_bps": around(1.0, 0.005)})
        return p
    pts = [with_baseline(i, r, g) for i, (r, g) in enumerate([("1s", -10.0), ("2s", -3.0), ("4s", 5.0)])]
    model = {0: 1.0, 1: 4.0, 2: 11.0}
    a = Archive({"p": pts}, lambda spec, p: model[p["index"]])
    v = evaluate(claim({"kind": "same_trend", "along": "rtt", "a": {"spec": "p", "metric": "pause_gain"},
                        "b": {"spec": "p", "metric": "pause_model_gain"}}), a)
    assert v.verdict == "holds" and v.basis.startswith("b rises"), v
    assert v.values["a"][0][1]["mean"] == pytest.approx(-10.0)


def test_same_trend_with_a_margin_calls_a_flat_a_no_difference():
    # the measured gain flat within ±1 point where the model rises (study 000's fig4-model-trend-25: means equal,
    # and without a margin no number of repetitions decides it)
    def flat(i, rtt, g):
        p = point(i, {"rtt": rtt}, {"goodput_bps": around(1 + g / 100, 0.0005)})
        p["without_pause"] = point(i, {"rtt": rtt}, {"goodput_bps": around(1.0, 0.0005)})
        return p
    pts = [flat(i, r, g) for i, (r, g) in enumerate([("1s", 0.1), ("2s", 0.0), ("4s", 0.1)])]
    a = Archive({"p": pts}, lambda spec, p: {0: 1.0, 1: 4.0, 2: 11.0}[p["index"]])
    test = {"kind": "same_trend", "along": "rtt", "a": {"spec": "p", "metric": "pause_gain"},
            "b": {"spec": "p", "metric": "pause_model_gain"}}
    assert evaluate(claim(test), a).verdict == "undecided"
    v = evaluate(claim({**test, "margin": 1}), a)
    assert v.verdict == "no-difference" and v.margin == 1 and v.basis.startswith("b rises"), v


def test_workload_records_are_read_per_flow_over_repetitions():
    p = point(0, {}, {"goodput_bps": [1.0, 1.0, 1.0]}, [("reno", {}), ("reno", {})])
    for rep, m in zip(p["repetitions"], (0.010, 0.012, 0.011)):
        rep["interactive"] = [{"flow": 1, "latency_s": {"mean": m}}]
    v = evaluate(claim({"kind": "bound", "q": {"spec": "x", "flows": [1], "metric": "interactive.latency_s.mean"},
                        "op": "<", "value": 0.02}), Archive({"x": [p]}))
    assert v.verdict == "holds" and v.values["q"]["mean"] == pytest.approx(0.011)


@pytest.mark.parametrize("test", [
    {"kind": "bound", "q": {"spec": "x"}, "op": "=>", "value": 1},
    {"kind": "trend", "q": {"spec": "x"}, "along": "a", "sign": "up"},
    {"kind": "nope"},
    {"kind": "bound", "q": {"spec": "x", "flows": "all"}, "op": ">", "value": 1},
    {"kind": "bound", "q": {"spec": "x"}, "op": ">", "value": 1, "margin": "2x"},
    {"kind": "compare", "a": {"spec": "x"}, "b": {"spec": "x"}, "op": ">", "margin": -1},
    {"kind": "within", "q": {"spec": "x"}, "value": 1, "tol": 0.1, "margin": "2%"},
    {"kind": "bound", "q": {"spec": "x"}, "op": ">", "value": 0, "margin": "2%"},
])
def test_malformed_claims_are_refused(test):
    with pytest.raises(ValidationError):
        claim(test)


def test_a_metric_that_does_not_fit_its_selection_is_named():
    from ccrig.analysis.claims import Quantity
    assert Quantity(spec="x", flows=[0], metric="speed").problem().startswith("expected one of")
    assert Quantity(spec="x", flows=[0, 1], metric="jain").problem() is None
    assert Quantity(spec="x", metric="pause_gain").problem() is None
    assert "system's" in Quantity(spec="x", flows=[0], metric="pause_gain").problem()


def test_eq1_per_repetition_at_the_repetitions_loss_and_each_flows_own_rtt():
    from ccrig.analysis.throughput import gaimd_bps
    # two standard flows at 0.4 s and 0.5 s; the repetition's loss per packet offered 1 %, 1.1 %, 1.2 %; the flows'
    # own `loss` (a mean of interval ratios, inflated by intervals in a timeout) is not what Eq. 1 reads
    loss = [0.01, 0.011, 0.012]
    flows = [("ab_standard", {"loss": [0.05] * 3, "throughput_bps": [350e3, 340e3, 330e3],
                              "rtt_s": [0.40, 0.41, 0.42]}),
             ("ab_standard", {"loss": [0.07] * 3, "throughput_bps": [250e3, 240e3, 230e3],
                              "rtt_s": [0.50, 0.51, 0.52]})]
    a = Archive({"per": [point(0, {"per": 0.01}, {"goodput_bps": around(9.0), "loss": loss}, flows)]})
    model = {"spec": "per", "flows": {"cc": "ab_standard"}, "metric": "gaimd_bps", "law": {"alpha": 1, "beta": 0.5}}
    measured = {"spec": "per", "flows": {"cc": "ab_standard"}, "metric": "throughput_bps"}
    v = evaluate(claim({"kind": "within", "value": 1.0, "tol": 0.5, "q": {"ratio": [measured, model]}}), a)
    want = [(sum(m["throughput_bps"][r] for _, m in flows) / 2)
            / (sum(gaimd_bps(loss[r], m["throughput_bps"][r], m["rtt_s"][r], 1, 0.5) for _, m in flows) / 2)
            for r in range(3)]
    assert v.values["q"]["mean"] == pytest.approx(sum(want) / 3, rel=1e-9)
    assert v.verdict in ("holds", "fails", "undecided")
    # a repetition that lost nothing has no Eq. 1 value: left out with the reason
    loss[2] = 0.0
    a = Archive({"per": [point(0, {"per": 0.01}, {"goodput_bps": around(9.0), "loss": loss}, flows)]})
    v = evaluate(claim({"kind": "within", "value": 1.0, "tol": 0.5, "q": {"ratio": [measured, model]}}), a)
    assert v.values["q"]["n"] == 2 and any("gaimd_bps" in e["reason"] for e in v.excluded)


def test_the_model_metric_needs_its_law_and_named_flows():
    from ccrig.analysis.claims import Quantity
    assert "needs law" in Quantity(spec="x", flows=[0], metric="gaimd_bps").problem()
    assert "per flow" in Quantity(spec="x", metric="gaimd_bps", law={"alpha": 1, "beta": 0.5}).problem()
    assert "only" in Quantity(spec="x", flows=[0], metric="loss", law={"alpha": 1, "beta": 0.5}).problem()
    assert Quantity(spec="x", flows={"cc": "a"}, metric="gaimd_bps", law={"alpha": 1, "beta": 0.5}).problem() is None


def test_eq5_per_repetition_at_each_flows_own_counted_loss_and_rtt():
    from ccrig.analysis.throughput import mathis_flow_bps
    # two flows: the model reads each flow's lost / sent over the repetition (`counts`), not its `loss` (a mean of
    # interval ratios), and its own mean smoothed RTT
    flows = [("mimd", {"loss": [0.5] * 3, "rtt_s": [0.05, 0.06, 0.07], "goodput_bps": around(3e6)}),
             ("reno", {"loss": [0.5] * 3, "rtt_s": [0.05, 0.05, 0.05], "goodput_bps": around(1e6)})]
    p = point(0, {"q": "pfifo"}, {"goodput_bps": around(9e6)}, flows)
    counted = [[(10, 1000), (20, 1200), (30, 1400)], [(40, 1000), (41, 1000), (42, 1000)]]
    for r, rep in enumerate(p["repetitions"]):
        for i, f in enumerate(rep["flows"]):
            f["counts"] = {"segs_lost": float(counted[i][r][0]), "segs_sent": float(counted[i][r][1])}
    a = Archive({"s": [p]})
    q = lambda i: {"spec": "s", "flows": [i], "metric": "mathis_bps"}
    v = evaluate(claim({"kind": "compare", "op": ">", "a": q(0), "b": q(1)}), a)
    want = [mathis_flow_bps(*counted[0][r], flows[0][1]["rtt_s"][r]) for r in range(3)]
    assert v.values["a"]["mean"] == pytest.approx(sum(want) / 3, rel=1e-12)
    assert want[0] == pytest.approx(1.224744871 * 11584 / (0.05 * 0.1), rel=1e-9)
    # a repetition in which the flow lost nothing has no Eq. 5 value: left out, with the reason
    p["repetitions"][1]["flows"][1]["counts"]["segs_lost"] = 0.0
    v = evaluate(claim({"kind": "compare", "op": ">", "a": q(0), "b": q(1)}), Archive({"s": [p]}))
    assert v.values["b"]["n"] == 2 and any("mathis_bps" in e["reason"] for e in v.excluded)
    # a summary without counts (written before flows had them): no value, so not applicable
    for rep in p["repetitions"]:
        rep["flows"][0].pop("counts")
    assert evaluate(claim({"kind": "compare", "op": ">", "a": q(0), "b": q(1)}), Archive({"s": [p]})).verdict \
        == "not-applicable"
    assert Quantity_problem("mathis_bps") is None


def Quantity_problem(metric, **kw):
    from ccrig.analysis.claims import Quantity
    return Quantity(spec="x", flows=[0], metric=metric, **kw).problem()


def test_eq5_needs_no_law_and_named_flows():
    from ccrig.analysis.claims import Quantity
    assert "only" in Quantity_problem("mathis_bps", law={"alpha": 1, "beta": 0.5})
    assert "per flow" in Quantity(spec="x", metric="mathis_bps").problem()
