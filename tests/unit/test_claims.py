"""A study's claims (analysis/claims.py): quantities read from summary points, and every test's four verdicts."""
import pytest
from pydantic import ValidationError

from ccrig.analysis.claims import Claim
from ccrig.analysis.verdicts import Archive, evaluate


def stat(mean, half=None):
    return {"mean": mean, "ci95": None if half is None else [mean - half, mean + half],
            "ci": {"method": "none" if half is None else "runs", "reason": "too few intervals" if half is None else ""}}


def point(index, params, system, flows=(), **extra):
    return {"index": index, "params": params, "system": {k: stat(*v) for k, v in system.items()},
            "flows": [{"flow": i, "cc": cc, **{k: stat(*v) for k, v in m.items()}} for i, (cc, m) in enumerate(flows)],
            **extra}


def claim(test, id="c"):
    return Claim.model_validate({"id": id, "paper": "says so", "test": test})


# a malicious source (flow 2) against two well-behaved ones, under FCFS and FQ
S4 = [point(0, {"q": "pfifo"}, {"goodput_bps": (9.0, 0.1), "jain": (0.4, 0.02)},
            [("reno", {"goodput_bps": (0.5, 0.1)}), ("reno", {"goodput_bps": (0.4, 0.1)}),
             ("none", {"goodput_bps": (8.1, 0.2)})]),
      point(1, {"q": "fq"}, {"goodput_bps": (9.0, 0.1), "jain": (0.98, 0.01)},
            [("reno", {"goodput_bps": (3.0, 0.2)}), ("reno", {"goodput_bps": (3.0, 0.2)}),
             ("none", {"goodput_bps": (3.0, 0.1)})])]


def test_bound_on_a_share_holds_beyond_its_interval():
    a = Archive({"s4": S4})
    v = evaluate(claim({"kind": "bound", "op": ">=", "value": 0.8,
                        "q": {"spec": "s4", "at": {"q": "pfifo"}, "flows": [2], "share": True}}), a)
    assert v.verdict == "holds" and v.basis == "beyond the confidence interval"
    assert v.values["q"]["mean"] == pytest.approx(0.9)
    v = evaluate(claim({"kind": "bound", "op": ">=", "value": 0.8,
                        "q": {"spec": "s4", "at": {"q": "fq"}, "flows": [2], "share": True}}), a)
    assert v.verdict == "fails"


def test_compare_and_inconclusive_when_the_intervals_overlap():
    a = Archive({"s4": S4})
    fq = {"spec": "s4", "at": {"q": "fq"}, "metric": "jain"}
    fcfs = {"spec": "s4", "at": {"q": "pfifo"}, "metric": "jain"}
    assert evaluate(claim({"kind": "compare", "a": fq, "op": ">", "b": fcfs}), a).verdict == "holds"
    assert evaluate(claim({"kind": "compare", "a": fcfs, "op": ">", "b": fq}), a).verdict == "fails"
    # flows 0 and 1 under FQ: 3.0 ± 0.2 each, the same
    f0 = {"spec": "s4", "at": {"q": "fq"}, "flows": [0]}
    f1 = {"spec": "s4", "at": {"q": "fq"}, "flows": [1]}
    v = evaluate(claim({"kind": "compare", "a": f0, "op": ">", "b": f1}), a)
    assert v.verdict == "inconclusive"


def test_flows_by_cc_average_and_sum():
    a = Archive({"s4": S4})
    q = {"spec": "s4", "at": {"q": "pfifo"}, "flows": {"cc": "reno"}, "agg": "sum"}
    v = evaluate(claim({"kind": "within", "q": q, "value": 0.9, "tol": 0.01}), a)
    assert v.values["q"]["mean"] == pytest.approx(0.9)
    assert v.verdict == "inconclusive"   # 0.9 ± 0.14 against a tolerance of 0.009
    q["agg"] = "mean"
    v = evaluate(claim({"kind": "within", "q": q, "value": 3.0, "tol": 0.1}), a)
    assert v.verdict == "fails" and v.values["q"]["mean"] == pytest.approx(0.45)


# study 001's shape: the responsive law's advantage over the smooth one shrinks as the loss rises
PER = [point(i, {"loss": per, "cc": cc}, {"goodput_bps": (g, h)})
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
    v = evaluate(claim({"kind": "bound", "q": {"spec": "alphabeta", "at": {"cc": "smooth"}}, "op": ">",
                        "value": 0}), quick)
    assert v.verdict == "not-applicable" and "no point" in v.basis


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


def test_jain_over_a_subset_of_flows():
    # under FCFS the two renos share alike between themselves, whatever the hog takes
    q = {"spec": "s4", "at": {"q": "pfifo"}, "flows": [0, 1], "metric": "jain"}
    v = evaluate(claim({"kind": "bound", "q": q, "op": ">=", "value": 0.9}), Archive({"s4": S4}))
    assert v.values["q"]["mean"] == pytest.approx(0.81 / (2 * 0.41)) and v.verdict == "holds"
    assert "means only" in v.basis
    q["flows"] = [0, 2]
    assert evaluate(claim({"kind": "bound", "q": q, "op": ">=", "value": 0.9}), Archive({"s4": S4})).verdict == "fails"


def test_without_an_interval_the_verdict_rests_on_means_and_says_so():
    a = Archive({"x": [point(0, {}, {"goodput_bps": (5.0,)})]})
    v = evaluate(claim({"kind": "bound", "q": {"spec": "x"}, "op": ">", "value": 4}), a)
    assert v.verdict == "holds" and "means only" in v.basis


def test_same_trend_against_a_model_and_the_pause_gain():
    pts = [point(i, {"rtt": r}, {"goodput_bps": (1.0, 0.1)},
                 pause_gain={"percent": g, "ci95": [g - 2, g + 2], "ci_method": "runs"})
           for i, (r, g) in enumerate([("1s", -10.0), ("2s", -3.0), ("4s", 5.0)])]
    model = {0: 1.0, 1: 4.0, 2: 11.0}
    a = Archive({"p": pts}, lambda spec, p: model[p["index"]])
    v = evaluate(claim({"kind": "same_trend", "along": "rtt", "a": {"spec": "p", "metric": "pause_gain"},
                        "b": {"spec": "p", "metric": "pause_model_gain"}}), a)
    assert v.verdict == "holds" and v.basis.startswith("b rises")


def test_workload_records_are_read_per_flow_over_repetitions():
    p = point(0, {}, {"goodput_bps": (1.0, 0.1)}, [("reno", {}), ("reno", {})])
    p["repetitions"] = [{"interactive": [{"flow": 1, "latency_s": {"mean": m}}]} for m in (0.010, 0.012, 0.011)]
    v = evaluate(claim({"kind": "bound", "q": {"spec": "x", "flows": [1], "metric": "interactive.latency_s.mean"},
                        "op": "<", "value": 0.02}), Archive({"x": [p]}))
    assert v.verdict == "holds" and v.values["q"]["mean"] == pytest.approx(0.011)


@pytest.mark.parametrize("test", [
    {"kind": "bound", "q": {"spec": "x"}, "op": "=>", "value": 1},
    {"kind": "trend", "q": {"spec": "x"}, "along": "a", "sign": "up"},
    {"kind": "nope"},
    {"kind": "bound", "q": {"spec": "x", "flows": "all"}, "op": ">", "value": 1},
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
