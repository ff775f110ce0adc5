"""analysis/compare.py and experiments/cli/compare.py: flows alike are pooled, two runs are compared class by class."""
from __future__ import annotations

import json

import pytest
import yaml

from ccrig.analysis.compare import outside
from ccrig.errors import InputError
from ccrig.experiments.cli.compare import compare

SPEC = {"name": "cmp", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit"}},
        "flows": [{"cc": "reno"}, {"count": 2, "cc": "cubic"}, {"cc": "cubic", "start": "5s"}],
        "duration": "30s"}


def run_dir(tmp_path, name, goodputs, system):
    d = tmp_path / name
    d.mkdir()
    (d / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    flows = [{"flow": i, "cc": "x", "goodput_bps": {"mean": g}} for i, g in enumerate(goodputs)]
    (d / "summary.json").write_text(json.dumps(
        {"points": [{"index": 0, "system": {"goodput_bps": {"mean": system}}, "flows": flows}]}))
    return d


def test_alike_flows_are_pooled_and_others_kept_apart(tmp_path):
    # the two cubic flows swap shares between the runs; the late-starting cubic flow is a class of its own
    a = run_dir(tmp_path, "a", [1.0e6, 2.0e6, 3.0e6, 1.5e6], 7.5e6)
    b = run_dir(tmp_path, "b", [1.0e6, 3.0e6, 2.0e6, 3.0e6], 9.0e6)
    rows = {r["class"]: r for r in compare(a, b)}
    assert set(rows) == {"reno, bulk", "cubic, bulk", "cubic, bulk, from 5s", "system"}
    assert rows["cubic, bulk"]["flows"] == [1, 2] and rows["cubic, bulk"]["ratio"] == pytest.approx(1.0)
    assert rows["cubic, bulk, from 5s"]["ratio"] == pytest.approx(2.0)
    assert rows["system"]["ratio"] == pytest.approx(1.2)
    assert [r["class"] for r in outside(list(rows.values()), 0.1)] == ["cubic, bulk, from 5s", "system"]


def test_not_a_run_directory_is_named(tmp_path):
    a = run_dir(tmp_path, "a", [1.0e6, 2.0e6, 3.0e6, 1.5e6], 7.5e6)
    with pytest.raises(InputError, match=r"RUN_B: got .*missing.*expected a run directory"):
        compare(a, tmp_path / "missing")


def test_a_failed_point_is_named_not_compared(tmp_path):
    a = run_dir(tmp_path, "a", [1.0e6, 2.0e6, 3.0e6, 1.5e6], 7.5e6)
    b = tmp_path / "b"
    b.mkdir()
    (b / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    (b / "summary.json").write_text(json.dumps({"points": [{"index": 0, "failed": "iperf3 flow 1: refused"}]}))
    with pytest.raises(InputError, match=r"RUN_B: point 0 failed \(iperf3 flow 1: refused\); expected every"):
        compare(a, b)


def test_ratios_carry_an_interval_from_the_repetitions(tmp_path):
    """Three repetitions each: the class of two cubic flows is judged by its repetitions' means, a flow alone
    and the system by their own summaries; one repetition of a class of several gives no interval."""
    from ccrig.analysis.stats import summarize

    def with_reps(name, per_rep):   # per_rep: [[goodput of flow 0..3] per repetition]
        d = tmp_path / name
        d.mkdir()
        (d / "spec.yaml").write_text(yaml.safe_dump(SPEC))
        reps = [{"rep": r, "flows": [{"flow": i, "goodput_bps": {"mean": g}} for i, g in enumerate(gs)]}
                for r, gs in enumerate(per_rep)]
        flows = [{"flow": i, "goodput_bps": summarize([gs[i] for gs in per_rep])} for i in range(4)]
        system = summarize([sum(gs) for gs in per_rep])
        (d / "summary.json").write_text(json.dumps({"points": [{"index": 0, "system": {"goodput_bps": system},
                                                                "flows": flows, "repetitions": reps}]}))
        return d

    # the cubic pair swaps shares every repetition (2+1, 1+2, 3+0): the class mean is steady at 1.5
    a = with_reps("a", [[1, 2, 1, 0.5], [1, 1, 2, 1], [1, 3, 0, 1.5]])
    b = with_reps("b", [[2, 1.5, 1.5, 0.5], [2, 2, 1, 1], [2, 0, 3, 1.5]])
    rows = {r["class"]: r for r in compare(a, b)}
    cubic = rows["cubic, bulk"]
    assert cubic["ratio"] == pytest.approx(1.0) and cubic["ratio_ci95"] == pytest.approx([1.0, 1.0])
    reno = rows["reno, bulk"]   # 1 against 2, no spread: a sure doubling
    assert reno["ratio"] == pytest.approx(2.0) and reno["ratio_ci95"] == pytest.approx([2.0, 2.0])
    # the system (4.5, 5, 5.5 against 5.5, 6, 6.5) and the late flow (0.5, 1, 1.5 in both) vary: their
    # intervals are wide, the system's holds 1 though its ratio is 1.2 (three repetitions cannot tell)
    system, late = rows["system"], rows["cubic, bulk, from 5s"]
    assert system["ratio"] == pytest.approx(1.2) and system["ratio_ci95"][0] < 1 < 1.2 < system["ratio_ci95"][1]
    assert late["ratio"] == pytest.approx(1.0) and late["ratio_ci95"][0] < 1 < late["ratio_ci95"][1]
    one = run_dir(tmp_path, "one", [1.0e6, 2.0e6, 3.0e6, 1.5e6], 7.5e6)   # one repetition, no spreads given
    assert all(r["ratio_ci95"] is None for r in compare(one, one))


def test_an_interval_widens_with_the_spread():
    from ccrig.analysis.stats import ratio_ci
    r, half = ratio_ci({"mean": 110.0, "std": 10.0, "n": 3}, {"mean": 100.0, "std": 10.0, "n": 3})
    assert r == pytest.approx(1.1) and 0 < half
    r2, half2 = ratio_ci({"mean": 110.0, "std": 20.0, "n": 3}, {"mean": 100.0, "std": 10.0, "n": 3})
    assert half2 > half
    assert ratio_ci({"mean": 1.0, "n": 1}, {"mean": 0.0, "n": 1}) == (None, None)
