"""`ccrig study run` on a study of the test's own (a folder holding study.yaml and specs/), through the real
command line and kernel: every spec runs into one study directory, every claim gets its verdict from the
measured runs, a killed study resumes keeping its finished specs, and a bad study.yaml is one line, exit 2."""
import hashlib
import json
import signal
import subprocess
import time
from datetime import datetime

import pytest
import yaml

from conftest import CCRIG, ROOT, dumbbell, leftovers
from support.interrupt import default_sigint
from support.machine import not_judged, verdict

from ccrig.experiments.run.together import ran_as_planned

# a 10 Mbit/s bottleneck: one reno flow against two, and a buffer sweep (the larger buffer queues longer)
SPECS = {
    "one": dumbbell([{"cc": "reno"}], duration="5s"),
    "sweep": dumbbell([{"count": 2, "cc": "reno"}], duration="5s",
                      sweep={"topology.bottleneck.buffer": ["10pkt", "100pkt"]}),
}
CLAIMS = [
    # the link is used: a flow alone takes most of it (a payload capacity of 9.56 Mbit/s)
    {"id": "alone-uses-the-link", "paper": "one flow fills the line",
     "test": {"kind": "bound", "q": {"spec": "one"}, "op": ">", "value": 8.5e6}},
    # two reno flows share alike (Jain over their goodput)
    {"id": "fair", "paper": "two like flows share alike",
     "test": {"kind": "bound", "q": {"spec": "sweep", "at": {"topology.bottleneck.buffer": "100pkt"},
                                     "metric": "jain"}, "op": ">=", "value": 0.9}},
    # the RTT grows with the buffer (queueing delay: 100 packets at 10 Mbit/s are 121 ms)
    {"id": "queue-delay", "paper": "a larger buffer, a longer delay",
     "test": {"kind": "trend", "q": {"spec": "sweep", "metric": "rtt_s"}, "along": "topology.bottleneck.buffer",
              "sign": "rises"}},
    # a claim that is false on purpose: two flows together cannot carry twice the line rate (their sum varies
    # little from run to run, where one reno flow's share of 5 s swings by megabits: 3 repetitions decide this; at
    # the line rate itself a busy machine's spread left it undecided: 9.69 Mbit/s, se 0.135, against 10)
    {"id": "false", "paper": "two flows together carry twice the line rate",
     "test": {"kind": "bound", "q": {"spec": "sweep", "at": {"topology.bottleneck.buffer": "100pkt"},
                                     "flows": [0, 1], "agg": "sum"}, "op": ">", "value": 20e6}},
]


def make_study(tmp_path, name="mini", claims=CLAIMS, quick=None, repetitions=1, k0=1):
    """The study's folder; k0 1 (the first pass: one repetition a point, or the specs' own) keeps the tests of
    the mechanics as cheap as they were."""
    folder = tmp_path / name
    (folder / "specs").mkdir(parents=True)
    for spec, body in SPECS.items():
        (folder / "specs" / f"{spec}.yaml").write_text(yaml.safe_dump({**body, "name": spec, "repetitions": repetitions},
                                                                       sort_keys=False))
    study = {"name": name, "title": "a study of the test's own", "k0": k0, "quick": quick or {"duration": "3s"},
             "specs": [{"spec": s, "answers": f"Fig. {i}"} for i, s in enumerate(SPECS)], "claims": claims,
             "absent": [{"what": "a simulator's magic", "why": "not Linux", "nearest": "nothing"}]}
    (folder / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    return folder


def study(args, tmp_path, timeout=300):
    argv = [*CCRIG, "study", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_a_study_runs_every_spec_and_judges_every_claim(tmp_path):
    folder = make_study(tmp_path, repetitions=3)   # verdicts come from repetitions: one decides nothing
    out = tmp_path / "studies"
    p = study(["run", str(folder), "--out", str(out), "--prometheus", "off", "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr + p.stdout
    (study_dir,) = out.iterdir()
    state = json.loads((study_dir / "study.json").read_text())
    assert {s: r["status"] for s, r in state["specs"].items()} == {"one": "done", "sweep": "done"}
    assert all(len(r["sha256"]) == 64 and r["seconds"] > 0 for r in state["specs"].values())
    claims = json.loads((study_dir / "claims.json").read_text())
    assert claims["quick"] is False and claims["started"] == state["started"]
    assert 0 <= claims["host_cpu_steal"] < 1   # the hypervisor's share of this machine's CPU time over the run
    assert claims["study_sha256"] == hashlib.sha256((folder / "study.yaml").read_bytes()).hexdigest()
    assert datetime.fromisoformat(claims["started"]).tzinfo is not None
    assert claims["error_rate"]["alpha"] == 0.05 and "O'Brien-Fleming" in claims["error_rate"]["method"]
    verdicts, starved = {c["id"]: c for c in claims["claims"]}, []
    verdict(verdicts["alone-uses-the-link"], "holds", starved)
    verdict(verdicts["queue-delay"], "holds", starved)
    false = verdict(verdicts["false"], "fails", starved)
    # two renos in 5 s may or may not look fair; whichever, the verdict is the measured Jain's
    fair = verdicts["fair"]
    verdict(fair, ("holds", "fails", "undecided"), starved)
    # the numbers the verdicts rest on are the runs' own repetitions, less those left out (with their reasons)
    summary = json.loads((_run_dir(state, "one", study_dir) / "summary.json").read_text())
    reps = summary["points"][0]["repetitions"]
    alone = verdicts["alone-uses-the-link"]
    kept = [r["system"]["goodput_bps"]["mean"] for r in reps
            if r["rep"] not in {e["rep"] for e in alone["excluded"]}]
    if kept:
        assert alone["values"]["q"]["mean"] == pytest.approx(sum(kept) / len(kept))
        assert alone["values"]["q"]["n"] == len(kept)
    assert all(e["reason"] for e in alone["excluded"])
    swept = json.loads((_run_dir(state, "sweep", study_dir) / "summary.json").read_text())["points"]
    jain = next(p for p in swept if p["params"]["topology.bottleneck.buffer"] == "100pkt")["system"]["jain"]
    if not fair["excluded"]:
        assert fair["values"]["q"]["mean"] == pytest.approx(jain["mean"])
    low, high = fair["interval"] or (None, None)
    assert fair["verdict"] != "holds" or low >= 0, fair   # the interval of jain - 0.9 decides it
    md = (study_dir / "claims.md").read_text()
    assert "| false |" in md and ("**fails**" in md or not false) and "a simulator's magic" in md
    assert (_run_dir(state, "sweep", study_dir) / "report" / "utility.png").is_file()
    # the report is made again from the archive alone
    (study_dir / "claims.md").unlink()
    p = study(["report", str(study_dir), "--no-runs"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert (study_dir / "claims.md").read_text() == md
    # a study directory moves whole (study.json names its runs relative to itself)
    moved = study_dir.rename(tmp_path / "moved")
    p = study(["report", str(moved), "--no-runs"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert (moved / "claims.md").read_text() == md.replace(str(study_dir.resolve()), str(moved.resolve()))
    if starved:
        not_judged("; ".join(starved))


def _run_dir(state, spec, study_dir):
    return study_dir / state["specs"][spec]["run_dir"]   # relative: a study directory moves whole


def test_quick_runs_one_point_and_judges_what_it_can(tmp_path):
    folder = make_study(tmp_path)
    out = tmp_path / "studies"
    p = study(["run", str(folder), "--quick", "--out", str(out), "--prometheus", "off", "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr + p.stdout
    (study_dir,) = out.iterdir()
    assert study_dir.name.startswith("mini-quick-")
    state = json.loads((study_dir / "study.json").read_text())
    summary = json.loads((_run_dir(state, "sweep", study_dir) / "summary.json").read_text())
    assert len(summary["points"]) == 1 and summary["intervals"] == 3
    claims = {c["id"]: c for c in json.loads((study_dir / "claims.json").read_text())["claims"]}
    verdicts = {k: c["verdict"] for k, c in claims.items()}
    assert verdicts["queue-delay"] == "not-applicable"     # one point: no trend to see
    assert verdicts["fair"] == "not-applicable"            # the 100-packet point was not run
    # one repetition has no interval: what can be read is undecided, never judged on its mean
    assert set(verdicts.values()) <= {"undecided", "not-applicable"}
    # undecided also when a busy machine spoiled that one repetition (CI, 2026-11-28: testbed-limited, the
    # bottleneck dequeued 0.86 of its rate beside a TCG guest), saying which repetition was left out and why
    alone = claims["alone-uses-the-link"]
    assert alone["verdict"] == "undecided", alone
    assert "no usable repetition" not in alone["basis"] or \
        [(e["point"], e["rep"]) for e in alone["excluded"]] == [("one#0", 0)], alone
    assert "quick mode" in (study_dir / "claims.md").read_text()


def test_a_killed_study_resumes_keeping_its_finished_pairs(tmp_path):
    folder = make_study(tmp_path, repetitions=2)
    out = tmp_path / "studies"
    argv = [*CCRIG, "study", "run", str(folder), "--out", str(out), "--prometheus", "off", "--no-progress"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    state_path, kept = None, {}
    # the specs' pairs run in one queue: wait until some pair is complete (its repetition.json, what a resume keeps)
    # while others are still to come
    while time.monotonic() < deadline:
        found = list(out.glob("*/study.json")) if out.exists() else []
        if found:
            state_path = found[0]
            kept = {f: f.read_bytes() for f in state_path.parent.glob("runs/*/points/*/rep*/repetition.json")}
            if kept:
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    assert leftovers(proc.pid) == []
    first = json.loads(state_path.read_text())["specs"]
    assert {r["status"] for r in first.values()} == {"interrupted"}, first
    # both specs ran in one queue, interleaved (the order study.json records mixes them)
    order = json.loads(state_path.read_text())["rounds"][0]["order"]
    assert {pair[0] for pair in order} == {"one", "sweep"} and len(order) == 2 + 2 * 2
    p = study(["run", str(folder), "--resume", str(state_path.parent), "--prometheus", "off", "--no-progress"],
              tmp_path)
    assert p.returncode == 0, p.stderr
    again = json.loads(state_path.read_text())["specs"]
    for spec in ("one", "sweep"):
        assert again[spec]["status"] == "done" and again[spec]["run_dir"] == first[spec]["run_dir"]
    for f, body in kept.items():   # a pair complete before the Ctrl-C is kept, not run again
        assert f.read_bytes() == body, f
    summary = json.loads((_run_dir({"specs": again}, "sweep", state_path.parent) / "summary.json").read_text())
    assert summary["complete"] and len(summary["points"]) == 2
    assert all(len(p["repetitions"]) == 2 for p in summary["points"])



def test_a_part_of_a_study_runs_a_loop_of_its_own_and_leaves_the_other_claims_not_applicable(tmp_path):
    folder = make_study(tmp_path, k0=3)
    out = tmp_path / "studies"
    p = study(["run", str(folder), "--specs", "one", "--budget", "2m", "--out", str(out), "--prometheus", "off",
               "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr + p.stdout
    (study_dir,) = out.iterdir()
    state = json.loads((study_dir / "study.json").read_text())
    assert state["part"] == ["one"] and state["loop"]["budget_s"] == 120 and state["loop"]["looks"]
    # done, or its last round cut where the budget ended (planned beyond what is left: budget.LAST_ROUND_FILL)
    assert ran_as_planned(state["specs"]["one"]) and state["specs"]["sweep"]["run_dir"] is None, state["specs"]
    claims = json.loads((study_dir / "claims.json").read_text())
    assert claims["part"] == ["one"] and claims["quick"] is False
    verdicts = {c["id"]: c for c in claims["claims"]}
    # the part's own claim judged over its repetitions; the others read a spec the part did not run
    starved: list[str] = []
    verdict(verdicts["alone-uses-the-link"], "holds", starved)
    for cid in ("fair", "queue-delay", "false"):
        assert verdicts[cid]["verdict"] == "not-applicable", verdicts[cid]
        assert "spec sweep was not run" in json.dumps(verdicts[cid]), verdicts[cid]
    assert "of a part: one" in (study_dir / "claims.md").read_text()
    # resumed, it stays that part: another part's specs are refused, naming both
    p = study(["run", str(folder), "--resume", str(study_dir), "--specs", "sweep", "--budget", "1m", "--prometheus",
               "off", "--no-progress"], tmp_path)
    assert p.returncode == 2 and "--specs: got sweep" in p.stderr and "is the part one" in p.stderr, p.stderr
    # without --budget too (a guest's share is always within the host's part)
    p = study(["run", str(folder), "--resume", str(study_dir), "--specs", "sweep", "--prometheus", "off",
               "--no-progress"], tmp_path)
    assert p.returncode == 2 and "another part is a study run of its own" in p.stderr, p.stderr
    # and a whole study's directory does not become a part on --resume
    whole = out / "whole"
    whole.mkdir()
    state.pop("part")
    (whole / "study.json").write_text(json.dumps(state))
    p = study(["run", str(folder), "--resume", str(whole), "--specs", "one", "--budget", "1m", "--prometheus", "off",
               "--no-progress"], tmp_path)
    assert p.returncode == 2 and "is the whole study's run" in p.stderr, p.stderr
    if starved:
        not_judged("; ".join(starved))

def test_bad_studies_are_one_line_and_exit_2(tmp_path):
    cases = [
        ([{"id": "x", "paper": "p", "test": {"kind": "bound", "q": {"spec": "missing"}, "op": ">", "value": 1}}],
         "spec 'missing' is not among the study's specs"),
        ([{"id": "x", "paper": "p", "test": {"kind": "bound", "q": {"spec": "one", "metric": "speed"}, "op": ">",
                                              "value": 1}}], "metric 'speed'"),
        ([{"id": "x", "paper": "p", "test": {"kind": "bound", "q": {"spec": "one"}, "op": "=>", "value": 1}}],
         "claims.0.test.bound.op"),
    ]
    for i, (claims, message) in enumerate(cases):
        folder = make_study(tmp_path, f"bad{i}", claims)
        p = study(["run", str(folder), "--out", str(tmp_path / "never")], tmp_path)
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and message in p.stderr, p.stderr
        assert not (tmp_path / "never").exists()
    p = study(["run", "no_such_study"], tmp_path)
    assert p.returncode == 2 and "expected one of" in p.stderr
    p = study(["report", str(tmp_path)], tmp_path)
    assert p.returncode == 2 and "study.json" in p.stderr
