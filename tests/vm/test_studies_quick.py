"""Every seed study in quick mode: each spec runs (the vm's share in one guest per study), every claim
gets a verdict, the claims table renders. Mechanics only: the verdicts are not asserted, the full runs' are in
each study's RESULTS.md."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccrig.experiments.run.study import find, load

ROOT = Path(__file__).resolve().parents[2]
CCRIG = [sys.executable, "-c", "from ccrig.experiments.cli.entry import main; main()"]
VERDICTS = {"holds", "fails", "no-difference", "undecided", "not-applicable"}


def test_the_four_seed_studies_are_there():
    assert set(find()) >= {"pause", "alphabeta", "polynomial", "keshav"}


@pytest.mark.parametrize("name", sorted(find()))
def test_quick(name, tmp_path):
    study, folder = load(name)
    p = subprocess.run([*CCRIG, "study", "run", name, "--quick", "--out", str(tmp_path), "--prometheus", "off",
                        "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (study_dir,) = tmp_path.iterdir()
    state = json.loads((study_dir / "study.json").read_text())
    assert {s: r["status"] for s, r in state["specs"].items()} == {s.spec: "done" for s in study.specs}
    for rec in state["specs"].values():   # the run directory each spec wrote, with its one point
        summary = json.loads((study_dir / rec["run_dir"] / "summary.json").read_text())
        assert summary["complete"] and len(summary["points"]) == 1, rec
    claims = json.loads((study_dir / "claims.json").read_text())["claims"]
    assert [c["id"] for c in claims] == [c.id for c in study.claims]
    assert {c["verdict"] for c in claims} <= VERDICTS
    md = (study_dir / "claims.md").read_text()
    assert "quick mode" in md and all(f"| {c.id} |" in md for c in study.claims)
    # every spec's report, with its utility diagram, exists (figures of the study's report)
    assert all((study_dir / r["run_dir"] / "report" / "report.md").is_file() for r in state["specs"].values())
