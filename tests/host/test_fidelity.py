"""The run certifies itself: a point the link limits is `ok`; one flow asked for several Gbit/s on
this machine is `testbed-limited` with its reason, and `fidelity: strict` then fails the run (exit 1) saying
why. Each run is 5 s of one or two flows through the netns dumbbell."""
from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from conftest import CCRIG, ROOT, dumbbell

pytestmark = pytest.mark.host


def _run(tmp_path, spec: dict, *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return subprocess.run([*CCRIG, "run", str(path), "--out", str(tmp_path / "runs"), "--prometheus", "off",
                           "--no-progress", *extra], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_a_link_limited_point_is_ok(tmp_path):
    p = _run(tmp_path, dumbbell([{"cc": "cubic", "count": 2}], duration="5s"), "--json")
    assert p.returncode == 0, p.stderr
    point = json.loads(p.stdout)["points"][0]
    assert point["fidelity"] == {"verdict": "ok", "reasons": []}, point["fidelity"]
    rep = point["repetitions"][0]["fidelity"]
    assert rep["goodput_of_t_max"] > 0.9 and rep["sampler_late_share"] is not None


def test_a_cpu_limited_point_is_testbed_limited_and_strict_fails(tmp_path):
    p = _run(tmp_path, dumbbell([{"cc": "cubic"}], duration="5s", rate="20gbit", fidelity="strict"))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "fidelity: strict" in p.stderr and "point 0" in p.stderr, p.stderr
    run = next((tmp_path / "runs").iterdir())
    point = json.loads((run / "summary.json").read_text())["points"][0]
    assert point["fidelity"]["verdict"] == "testbed-limited" and point["fidelity"]["reasons"]
