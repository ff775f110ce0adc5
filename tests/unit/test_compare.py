"""analysis/compare.py: flows alike are pooled, two runs are compared class by class."""
from __future__ import annotations

import json

import pytest
import yaml

from analysis.compare import compare, outside
from experiments.errors import InputError

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
