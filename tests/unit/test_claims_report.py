"""The claims table (experiments/report/study.py) from verdicts judged on repetitions: claims.json says when the
study started, whether it was quick, which study.yaml it ran, its error rate and method, and every repetition
left out with its reason; claims.md says the same to a reader."""
import json

from ccrig.analysis.claims import Claim
from ccrig.experiments.report import study as study_report
from ccrig.analysis.sequential import Design
from ccrig.analysis.verdicts import Archive, evaluate


def rep(r, goodput, **extra):
    return {"rep": r, "fidelity": {"verdict": "ok", "reasons": []}, "system": {"goodput_bps": {"mean": goodput}},
            "flows": [], **extra}


def test_claims_json_records_the_run_the_error_rate_and_every_exclusion(tmp_path):
    reps = [rep(0, 9.1e6), rep(1, 9.3e6), rep(2, 9.2e6),
            rep(3, 5e6, fidelity={"verdict": "testbed-limited", "reasons": ["the sampler was late"]})]
    archive = Archive({"one": [{"index": 0, "params": {}, "system": {"goodput_bps": {"mean": 8.2e6}}, "flows": [],
                                "repetitions": reps}]})
    claims = [Claim.model_validate({"id": "fills", "paper": "fills the link", "test": {
                  "kind": "bound", "q": {"spec": "one"}, "op": ">", "value": 8.5e6}}),
              Claim.model_validate({"id": "same", "paper": "as the model says", "test": {
                  "kind": "bound", "q": {"spec": "one"}, "op": ">", "value": 9.2e6, "margin": "5%"}})]
    design = Design(max_looks=1)
    results = [evaluate(c, archive, 1, design).to_dict() for c in claims]
    state = {"started": "2026-11-25T12:00:00+00:00", "quick": False, "study_sha256": "ab" * 32,
             "specs": {"one": {"answers": "Fig. 1", "status": "done", "run_dir": None, "sha256": "cd" * 32}}}
    md = study_report.write(tmp_path, {"name": "mini", "title": "a study"}, state, results, False,
                            design.describe()).read_text()
    out = json.loads((tmp_path / "claims.json").read_text())
    assert out["started"] == state["started"] and out["quick"] is False and out["study_sha256"] == "ab" * 32
    assert out["error_rate"]["alpha"] == 0.05 and "Bonferroni over looks" in out["error_rate"]["method"]
    assert out["counts"] == {"holds": 1, "fails": 0, "no-difference": 1, "undecided": 0, "not-applicable": 0}
    fills = out["claims"][0]
    assert fills["verdict"] == "holds" and fills["values"]["q"]["n"] == 3
    assert fills["interval"][0] > 0.3e6 and fills["level"] == 0.95
    # the spoiled repetition: once for the study, with its reason, and in each claim that read it
    assert out["excluded"] == [{"point": "one#0", "rep": 3,
                                "reason": "fidelity testbed-limited: the sampler was late"}]
    assert all(c["excluded"] == out["excluded"] for c in out["claims"])
    assert "error rate: per claim: P(holds or fails | no true difference) <= 0.05" in md
    assert "| fills | one#0 | 3 | fidelity testbed-limited: the sampler was late |" in md
    assert "| same | as the model says |" in md and "| no difference |" in md
    assert "study.yaml changed" not in md
    # judged by a study.yaml other than the one the run began with: said, not hidden
    state["judged_study_sha256"] = "ef" * 32
    md = study_report.write(tmp_path, {"name": "mini", "title": "a study"}, state, results, False,
                            design.describe()).read_text()
    assert "**study.yaml changed since the run started**" in md
    assert json.loads((tmp_path / "claims.json").read_text())["judged_study_sha256"] == "ef" * 32
    assert "hypervisor" not in md   # no steal recorded (an older study.json), none said


def test_time_the_hypervisor_stole_during_a_study_is_said_beside_the_kernel(tmp_path):
    from ccrig.experiments.run import fidelity, study as study_run
    state = study_run.new_state(study_run.load("pause")[0], study_run.load("pause")[1], quick=False)
    start = state["host_cpu_at_start"]   # /proc/stat's jiffies, all cpus, and the boot they count from
    assert len(start["jiffies"]) == 4 and start["jiffies"][1] <= fidelity.cpu_times()["cpu"][1]
    assert start["boot_id"] == fidelity.cpu_now()["boot_id"] != ""
    assert 0 <= fidelity.steal_since({**start, "jiffies": [0, 0, 0, 0]}) < 1   # since this machine booted
    assert fidelity.steal_since({**start, "boot_id": "another boot, or a vm guest's"}) is None
    # a study.json the run finished: 12 % of the host's CPU time went to other guests between start and end
    state.update(host_kernel="6.18.44", host_cpu_steal=0.12)
    md = study_report.write(tmp_path, {"name": "mini", "title": "a study"}, state, [], False, None).read_text()
    assert "- this machine's kernel: 6.18.44; the hypervisor took 12% of its CPU time during the run (steal" in md
    assert json.loads((tmp_path / "claims.json").read_text())["host_cpu_steal"] == 0.12
    # and the run's waits for it to pass (experiments/run/steal.py), with their probes
    state["steal_waits"] = [{"seconds": 90.0, "probes": [{"steal": 0.2}] * 3}, {"seconds": 30.0, "probes": [{}]}]
    md = study_report.write(tmp_path, {"name": "mini", "title": "a study"}, state, [], False, None).read_text()
    assert "steal: other guests on its host); the run waited 2.0 min for steal to pass (2 wait(s), 4 probe(s))" in md


def test_a_study_on_a_fleet_says_which_member_ran_what_and_which_it_lost(tmp_path):
    """The runs' summary.json `fleet` and member.json files, gathered per spec; a study run here has none."""
    state = {"specs": {}}
    for spec, served, lost in (("one", ["f1", "f2", "f2"], []),
                               ("two", ["f1", "f1"], [{"member": "f2", "at": "2026-11-26T14:00:00+0000",
                                                       "why": "unreachable before the run", "pairs_dealt_again": []}])):
        run = tmp_path / "runs" / spec
        for k, member in enumerate(served):
            (run / "points/000" / f"rep{k}").mkdir(parents=True)
            (run / "points/000" / f"rep{k}" / "member.json").write_text(json.dumps({"member": member}))
        (run / "summary.json").write_text(json.dumps({"fleet": {"inventory": "fleet.yml", "lost": lost}}))
        state["specs"][spec] = {"answers": "Fig. 1", "status": "done", "run_dir": f"runs/{spec}", "sha256": "cd" * 32}
    fleet = study_report.fleet_of(tmp_path, state)
    assert fleet["specs"] == {"one": {"inventory": "fleet.yml", "served": {"f1": 1, "f2": 2}},
                              "two": {"inventory": "fleet.yml", "served": {"f1": 2}}}
    assert [(x["spec"], x["member"]) for x in fleet["lost"]] == [("two", "f2")]
    lines = "\n".join(study_report._fleet_lines(fleet))
    assert "| one | f1: 1, f2: 2 |" in lines
    assert "- f2, in spec two at 2026-11-26T14:00:00+0000: unreachable before the run (0 pair(s) dealt again)" in lines
    state["specs"] = {"one": {"status": "done", "run_dir": None}}
    assert study_report.fleet_of(tmp_path, state) is None and study_report._fleet_lines(None) == []
