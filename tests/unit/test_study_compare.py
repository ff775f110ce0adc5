"""Two runs of a study compared claim by claim (experiments/report/study_compare.py), and the seed a second run takes
(ccrig study run --seed)."""
import json

import pytest

from ccrig.errors import InputError
from ccrig.experiments.report import study_compare
from ccrig.experiments.run.study import load, resolved


def run(verdicts: dict, seed: int, sha: str = "s1", study: str = "alphabeta") -> dict:
    return {"study": study, "started": f"2026-11-2{seed}T00:00:00+00:00", "seed": seed, "study_sha256": sha,
            "claims": [{"id": k, "verdict": v, "measured": f"{k}={seed}",
                        "interval": [0.1, 0.2] if v in ("holds", "fails", "no-difference") else None}
                       for k, v in verdicts.items()]}


def test_agreement_counts_the_same_verdicts_and_undecided_agrees_only_with_itself():
    a = run({"c1": "holds", "c2": "undecided", "c3": "fails", "c4": "no-difference"}, 5)
    b = run({"c1": "holds", "c2": "holds", "c3": "fails", "c4": "undecided"}, 6)
    doc = study_compare.compare(a, b)
    assert doc["agree"] == 2 and doc["of"] == 4 and doc["undecided"] == {"a": 1, "b": 1}
    assert [r["agree"] for r in doc["claims"]] == [True, False, True, False]
    md = study_compare.markdown(doc)
    assert "Agreement: 2 of 4 verdicts (50%)" in md and "| c2 | **undecided** | **holds** |" in md
    assert "seed 5" in md and "study.yaml differ" not in md


def test_a_claim_in_one_run_only_and_a_verdict_without_an_interval_are_named():
    a = run({"c1": "holds"}, 5)
    a["claims"][0]["interval"] = None   # a claims.json from before the engine: means only
    b = run({"c1": "holds", "c2": "fails"}, 6, sha="s2")
    doc = study_compare.compare(a, b)
    # c2 was added between the runs (a new claim, or a retired one the other way): one run cannot have judged it,
    # so it is shown but neither agrees nor disagrees (keshav's runs E and J: 6 of 13 counted, 6 of 7 measured)
    assert doc["claims"][1]["a"] == "absent" and doc["one_sided"] == 1
    assert doc["of"] == 1 and doc["agree"] == 1 and doc["undecided"] == {"a": 0, "b": 0}
    assert doc["without_interval"] == {"a": ["c1"], "b": []} and not doc["same_claims"]
    md = study_compare.markdown(doc)
    assert "their study.yaml differ" in md and "(1 claim(s) in one run's study.yaml only, left out)" in md
    assert "| c2 | **absent** | **fails** |" in md



def test_claims_neither_run_judged_are_left_out_of_agreement_and_counted_apart():
    # two runs of one part of a study: the other specs' claims are not applicable in both
    a = run({"c1": "holds", "c2": "undecided", "x1": "not-applicable", "x2": "not-applicable"}, 5)
    b = run({"c1": "holds", "c2": "holds", "x1": "not-applicable", "x2": "undecided"}, 6)
    doc = study_compare.compare(a, b)
    assert doc["agree"] == 1 and doc["of"] == 3 and doc["unjudged"] == 1
    md = study_compare.markdown(doc)
    assert "Agreement: 1 of 3 verdicts (33%) (1 claim(s) not applicable in both, left out)" in md
    assert "undecided: 1 in A, 1 in B (33%, 33%)" in md

def test_bad_inputs_name_what_is_expected(tmp_path):
    with pytest.raises(InputError, match="expected one study"):
        study_compare.compare(run({}, 1), run({}, 2, study="pause"))
    with pytest.raises(InputError, match="expected a study directory or its claims.json"):
        study_compare.load(tmp_path)
    (tmp_path / "claims.json").write_text(json.dumps({"claims": 3}))
    with pytest.raises(InputError, match="expected a claims.json"):
        study_compare.load(tmp_path)


def test_a_second_run_takes_its_seed_for_every_spec_quick_or_not():
    study, folder = load("alphabeta")
    entry = study.specs[0]
    assert resolved(folder, study, entry, False)[2].seed == 1801   # the spec's own
    assert {resolved(folder, study, entry, quick, None, 7)[2].seed for quick in (False, True)} == {7}
