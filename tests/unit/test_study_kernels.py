"""`ccrig study run --by-kernel`'s table (experiments/report/study_kernels.py): one column per kernel, a claim two
kernels decided in different words flagged, undecided and not-run saying nothing either way."""
from ccrig.experiments.report.study_kernels import markdown, table


def _claims(**verdicts):
    return {"claims": [{"id": cid.replace("_", "-"), "verdict": v} for cid, v in verdicts.items()]}


def test_a_claim_decided_differently_on_two_kernels_is_flagged():
    doc = table([
        {"label": "netns", "kernel": "6.18.44", "testbed": "netns", "study_dir": "netns/s",
         "claims": _claims(a="holds", b="holds", c="undecided", d="no-difference")},
        {"label": "vm", "kernel": "6.1.0-56-amd64", "testbed": "vm", "study_dir": "vm/s",
         "claims": _claims(a="fails", b="holds", c="holds", d="fails")},
    ])
    assert doc["differ"] == ["a", "d"]
    assert [r["verdicts"] for r in doc["claims"]][2] == {"netns": "undecided", "vm": "holds"}
    md = markdown(doc, "mini")
    assert "| a | holds | fails | **differs** |" in md and "| c | undecided | holds |  |" in md
    assert "2 of 4 claims decided differently on two kernels: a, d." in md


def test_a_kernel_that_could_not_run_the_study_says_why_and_decides_nothing():
    doc = table([
        {"label": "netns", "kernel": "6.18.44", "testbed": "netns", "error": "preflight: sch_red missing"},
        {"label": "vm", "kernel": "6.1.0-56-amd64", "testbed": "vm", "study_dir": "vm/s",
         "claims": _claims(a="holds")},
    ])
    assert doc["differ"] == [] and doc["claims"][0]["verdicts"] == {"netns": "not run", "vm": "holds"}
    assert "not run (preflight: sch_red missing)" in markdown(doc, "mini")


def test_a_part_of_a_study_says_which_specs_ran_on_each_kernel():
    doc = {"study": "mini", "seed": 3, "specs": ["rtt_bulk", "low_threshold"], **table([
        {"label": "netns", "kernel": "6.18.44", "testbed": "netns", "study_dir": "netns/s",
         "claims": _claims(a="holds", b="not-applicable")}])}
    md = markdown(doc, "mini")
    assert "Only the specs rtt_bulk, low_threshold ran (--specs), on each kernel" in md
    assert "Only the specs" not in markdown({**doc, "specs": None}, "mini")
