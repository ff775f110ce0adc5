"""The fleet (`ccrig run --fleet INVENTORY`, experiments/run/fleet.py): a run's pairs dealt to the members of an
Ansible inventory over real SSH. The members are network namespaces with sshd of their own (tests/support's SSH
hosts), each running its share with this checkout's ccrig on this kernel; Ansible drives them as it would lab
hosts. A member lost mid-run has its pairs dealt to the others; Ctrl-C leaves nothing on any member; a member
that cannot answer is refused before anything runs."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import CCRIG as CCRIG_ARGV, ROOT, dumbbell

from support.machine import STEAL, not_judged, verdict
from support.sshhosts import Host, SshHosts

from ccrig.experiments.run.fidelity import cpu_now, steal_since

CCRIG = str(Path(sys.executable).parent / "ccrig")


@pytest.fixture
def fleet():
    bed = SshHosts([Host(f"f{i}", ["fleet"], extra={"ccrig_command": CCRIG, "ccrig_jobs": 1}) for i in (1, 2)])
    with bed:
        yield bed


def _start(ccrig, fleet, spec: dict) -> subprocess.Popen:
    argv = ccrig.argv(ccrig.write(spec), "--fleet", str(fleet.inventory))
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _left(pid: int) -> list[str]:
    """What a fleet run of this pid left on any member (they share this machine): namespaces, processes,
    scratch folders."""
    prefix = f"ccrig-{pid}-"
    ns = [n for n in os.listdir("/run/netns") if n.startswith(prefix)] if os.path.isdir("/run/netns") else []
    procs = subprocess.run(["pgrep", "-a", "-f", f"[-]-prefix {prefix}"], capture_output=True, text=True).stdout
    scratch = [str(p) for p in Path("/tmp").glob(f"{prefix}*")] + [str(p) for p in Path("/tmp").glob(
        f"ccrig-{pid}-fleet-*")]
    return ns + procs.splitlines() + scratch


def _power_off(ns: str) -> int:
    """Every process of a member's namespace gone at once, as at a power-off: killed until none is left (one pass
    misses a process forked meanwhile, and it runs on: an async job's run that survived this way left an iperf3
    server behind). Returns how many were killed."""
    killed = 0
    while pids := subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
        subprocess.run(["kill", "-KILL", *pids])
        killed += len(pids)
    return killed


def test_a_run_is_dealt_to_two_members_and_comes_back_whole(ccrig, fleet):
    spec = dumbbell([{"cc": "reno"}], duration="4s", repetitions=2,
                    sweep={"topology.bottleneck.rate": ["10mbit", "20mbit"]})
    p = _start(ccrig, fleet, spec)
    out, err = _ended(p, 300)
    assert p.returncode == 0, err[-2000:] + fleet.report()
    run = ccrig.run_dirs()[-1]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] and summary["fleet"]["lost"] == []
    assert set(summary["fleet"]["members"]) == {"f1", "f2"}
    assert summary["kernel"] == os.uname().release
    members = []
    for rep in sorted(run.glob("points/*/rep*")):
        member = json.loads((rep / "member.json").read_text())
        assert member["facts"]["kernel"] == os.uname().release and member["env"]["kernel"]["release"]
        members.append(member["member"])
        assert json.loads((rep / "repetition.json").read_text())["fidelity"]["verdict"] == "ok"
    assert len(members) == 4 and set(members) == {"f1", "f2"}, members
    # each pair measured against its own link on its member
    for point, rate in zip(summary["points"], (10e6, 20e6)):
        g = point["system"]["goodput_bps"]["mean"]
        assert 0.85 * rate * 1448 / 1514 < g < 1.02 * rate, (rate, g)
        assert len(point["repetitions"]) == 2 and point["system"]["goodput_bps"]["ci"]["method"] == "runs"
    # the members' samples are the run's, under its name
    runs = {json.loads(line)["labels"].get("run") for line in (run / "samples.jsonl").read_text().splitlines()}
    assert runs == {summary["run"]}
    # every member's work went through Ansible, logged like any command of the run
    assert "fleet_pairs.yml" in (run / "commands.log").read_text()
    assert _left(p.pid) == []


def test_a_member_lost_mid_run_has_its_pairs_dealt_to_the_other(ccrig, fleet):
    spec = dumbbell([{"cc": "reno"}], duration="6s", repetitions=3)
    p = _start(ccrig, fleet, spec)
    f2 = fleet.ns("f2")
    # f2 is measuring (its run made a namespace of its own prefix): it goes down as a powered-off host would,
    # every process in it gone at once (sshd, its sessions, its run)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not [n for n in os.listdir("/run/netns")
                                               if n.startswith(f"ccrig-{p.pid}-m1-")]:
        time.sleep(0.1)
    lost_at, cpu_at = time.monotonic(), cpu_now()
    assert _power_off(f2), "f2 had nothing running"
    try:
        out, err = _ended(p, 300)
    finally:
        _cleared(f"ccrig-{p.pid}-m1")
    assert p.returncode == 0, err[-2000:] + fleet.report()
    assert "fleet member f2 lost" in out + err
    summary = ccrig.summary()
    assert summary["complete"] and len(summary["points"][0]["repetitions"]) == 3
    lost = summary["fleet"]["lost"]
    assert [x["member"] for x in lost] == ["f2"] and lost[0]["pairs_dealt_again"], lost
    assert "unreachable" in lost[0]["why"] or "exited" in lost[0]["why"], lost
    run = ccrig.run_dirs()[-1]
    served = {int(r.parent.name[3:]): json.loads(r.read_text())["member"] for r in run.glob("points/*/rep*/member.json")}
    # what f2 had when it went down came back from f1
    assert len(served) == 3 and all(served[rep] == "f1" for _, rep in lost[0]["pairs_dealt_again"]), (served, lost)
    # the loss is seen and its pairs run again within 200 s of the CPU this machine had: its hypervisor's steal
    # comes out of the wall time (236 s at 5-45 % steal in CI on 2026-12-03, a run that was right in every other way)
    took, steal = time.monotonic() - lost_at, steal_since(cpu_at) or 0.0
    assert took * (1 - steal) < 200, f"{took:.0f} s from the loss to the run's end at {steal:.0%} steal"
    assert _left(p.pid) == []


def test_ctrl_c_stops_every_members_pairs_and_leaves_nothing_and_the_run_resumes(ccrig, fleet):
    spec = dumbbell([{"cc": "reno"}], duration="12s", repetitions=2)
    p = _start(ccrig, fleet, spec)
    deadline = time.monotonic() + 120
    # both members measuring
    while time.monotonic() < deadline and len({n.split("-")[2] for n in os.listdir("/run/netns")
                                               if n.startswith(f"ccrig-{p.pid}-m")}) < 2:
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = _ended(p, 180)
    assert p.returncode == 130, err[-2000:] + fleet.report()
    assert "interrupted" in err and "Traceback" not in err
    assert _left(p.pid) == []
    summary = ccrig.summary()
    assert not summary["complete"] and set(summary["fleet"]["members"]) == {"f1", "f2"}
    # --resume deals what was not complete to the fleet again
    run = ccrig.run_dirs()[-1]
    argv = ccrig.argv(ccrig.tmp / "spec.yaml", "--fleet", str(fleet.inventory), "--resume", str(run))
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:] + fleet.report()
    summary = ccrig.summary()
    assert summary["complete"] and len(summary["points"][0]["repetitions"]) == 2
    assert len(list(run.glob("points/*/rep*/member.json"))) == 2


@pytest.mark.parametrize("fault", ["sshd down", "no ccrig"])
def test_a_member_that_cannot_answer_is_refused_before_anything_runs(ccrig, fleet, fault):
    if fault == "sshd down":
        fleet.sshd["f2"].kill()
        fleet.sshd["f2"].wait()
        said = "unreachable"
    else:
        fleet.hosts["f2"].extra["ccrig_command"] = "/no/such/ccrig"
        fleet.write_inventory()
        said = "no ccrig to run"
    p = _start(ccrig, fleet, dumbbell([{"cc": "reno"}], duration="4s"))
    out, err = _ended(p, 120)
    assert p.returncode == 2, err
    assert "--fleet" in err and "host f2" in err and said in err and "host f1" not in err, err
    assert ccrig.run_dirs() == [] and _left(p.pid) == []


def _cleared(prefix: str) -> None:
    """What a member powered off (or a run killed) left on this machine under prefix, cleared as a reboot would:
    its namespaces and devices (`ccrig clean`: a member killed in its preflight left ccrig-PID-m1-qprobe in CI when
    the test timed out before this ran) and its work folders in /tmp."""
    subprocess.run([CCRIG, "clean", "--prefix", prefix], capture_output=True)
    for left in [Path("/tmp", prefix), *Path("/tmp").glob(f"{prefix}-*")]:
        if left.is_dir():
            shutil.rmtree(left, ignore_errors=True)
        else:
            left.unlink(missing_ok=True)


def _ended(p: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """The run's output once it ended; past the timeout it is sent SIGTERM and waited for (it tears down and
    leaves nothing: a SIGKILL at the timeout left its scratch folders in CI under steal), then the test fails.
    A run still there 300 s after SIGTERM is killed and what it leaves is removed by its prefix, so that the
    test's failure is the only trace (CI on 2026-12-03: a fleet study's teardown outlived 120 s at 38 % steal)."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            _cleared(f"ccrig-{p.pid}")
            raise AssertionError(f"not ended within {timeout} s, nor 300 s after SIGTERM (killed): "
                                 f"{(err or '')[-1000:]}{(out or '')[-1000:]}")
        raise AssertionError(f"not ended within {timeout} s; SIGTERM: {(err or '')[-1000:]}{(out or '')[-1000:]}")


def test_a_study_by_kernel_on_a_fleet_groups_its_members_and_goes_on_when_one_is_lost_between_its_specs(
        tmp_path, fleet):
    # one study for both (two took 353 s of CI's 1817 on cab4b4d, about 80 s each alone): --by-kernel groups the
    # members by kernel (both run this machine's: one group), then f2 goes down between the study's two specs
    from test_study_run import CLAIMS, make_study   # its study of two specs and four claims
    # two repetitions a point (the fleet's six pairs): a t interval on one degree of freedom is 12.7 standard
    # errors wide, so the bound asks half the line, not 85 % of it (official CI on 4219937: 9.68 Mbit/s, se 0.128,
    # undecided against 8.5)
    claims = [{**c, "test": {**c["test"], "value": 5e6}} if c["id"] == "alone-uses-the-link" else c for c in CLAIMS]
    folder, out = make_study(tmp_path, claims=claims, repetitions=2), tmp_path / "studies"
    p = subprocess.Popen([*CCRIG_ARGV, "study", "run", str(folder), "--by-kernel", "--out", str(out),
                          "--prometheus", "off", "--no-progress", "--fleet", str(fleet.inventory)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # the first spec done (the group's study directory: parent/group/study): f2 goes down before the second
    # starts its batches (or while they run)
    deadline, done_first = time.monotonic() + 300, []
    while time.monotonic() < deadline and not done_first:
        states = [json.loads(f.read_text()) for f in out.glob("*/*/*/study.json")] if out.exists() else []
        done_first = [s for s, r in states[0]["specs"].items() if r.get("status") == "done"] if states else []
        time.sleep(0.2)
    _power_off(fleet.ns("f2"))
    try:
        said, _ = _ended(p, 400)
    finally:
        _cleared(f"ccrig-{p.pid}-m1")
    assert p.returncode == 0, said[-3000:]
    assert "fleet member f2" in said, said[-3000:]
    (parent,) = out.iterdir()
    doc = json.loads((parent / "kernels.json").read_text())
    # both members run this machine's kernel: one group, dealt to both
    assert [k["label"] for k in doc["kernels"]] == [f"fleet {os.uname().release}"] and doc["differ"] == []
    (group,) = doc["kernels"]
    study_dir = parent / group["study_dir"]
    state = json.loads((study_dir / "study.json").read_text())
    assert {r["status"] for r in state["specs"].values()} == {"done"}
    claims = json.loads((study_dir / "claims.json").read_text())
    by_id, starved = {c["id"]: c for c in claims["claims"]}, []
    # judged, not asserted decided: two repetitions of a run a lost member's pairs went to again are "undecided"
    # when a loaded machine spreads them (CI, 2026-11-28)
    verdict(by_id["alone-uses-the-link"], ("holds", "undecided"), starved)
    verdict(by_id["false"], ("fails", "undecided", "no-difference"), starved)
    # every pair served, by both members (f2 in the first spec)
    served = [json.loads(r.read_text())["member"] for r in study_dir.glob("runs/*/points/*/rep*/member.json")]
    assert len(served) == 6 and set(served) == {"f1", "f2"}, served
    # the study says where each spec ran and which member it lost, in which spec, when
    (done_first,) = done_first
    dealt = claims["fleet"]
    assert set(dealt["specs"]) == set(state["specs"]), dealt
    assert [(x["member"], x["spec"] != done_first) for x in dealt["lost"]] == [("f2", True)], dealt
    after = dealt["lost"][0]["spec"]   # f2 ran none of the spec it was lost in (its batch, if any, went to f1)
    assert set(dealt["specs"][after]["served"]) == {"f1"}, dealt
    md = (study_dir / "claims.md").read_text()
    assert "## Fleet" in md and f"- f2, in spec {after} at " in md, md
    if starved:
        not_judged("; ".join(starved))


def test_provision_prepares_the_members_and_a_second_run_changes_nothing(tmp_path, fleet):
    inv = yaml.safe_load(fleet.inventory.read_text())
    del inv["all"]["children"]["controller"]   # a fleet's inventory: its members alone
    # `make deps` refreshed the lists; no mirror traffic from the tests (official CI on ccf5b00: the role's
    # apt-get update hung past 600 s, and the other provisioning test waited on its lock)
    inv["all"]["vars"]["packages_update_cache"] = False
    path = tmp_path / "fleet.yml"
    path.write_text(yaml.safe_dump(inv))
    said = []
    for _ in range(2):
        p = subprocess.run([CCRIG, "provision", "-i", str(path)], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        said.append(p.stderr.strip().splitlines()[-1])
    # the tools' role ran on both members (here every package is installed already: nothing to change)
    tools = p.stderr.split("TASK packages : Install the experiment tools")[1].split("TASK")[0]
    assert "f1" in tools and "f2" in tools, p.stderr
    assert said[1] == "site.yml: no change on 2 host(s)", said


def test_a_fleet_study_with_a_budget_smaller_than_its_first_pass_is_cut_and_judged_on_what_ran(tmp_path, fleet):
    # Fleet.deal deals no batch once the budget's deadline passed (before, a fleet's specs ran whole whatever the
    # budget); the batches out come back, the pairs left are counted as the runner's own (runner.cut_short)
    from test_study_budget import REPS, make
    folder = make(tmp_path, "fleetcut", "12mbit", REPS)
    out = tmp_path / "studies"
    p = subprocess.Popen([*CCRIG_ARGV, "study", "run", folder, "--out", str(out), "--budget", "120s",
                          "--prometheus", "off", "--no-progress", "--fleet", str(fleet.inventory)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said, _ = _ended(p, 400)
    assert p.returncode == 0, said[-3000:]
    assert _left(p.pid) == []
    (d,) = out.iterdir()
    state = json.loads((d / "study.json").read_text())
    (look,) = state["loop"]["looks"]
    assert look["final"] and look["cut"], look
    served = 0
    for spec, rec in state["specs"].items():
        summary = json.loads((d / rec["run_dir"] / "summary.json").read_text())
        assert rec["cut"] == look["cut"].get(spec, 0) == (summary.get("cut") or {}).get("pairs_not_run", 0), rec
        assert rec["status"] == (f"cut: {rec['cut']} pair(s) left to run when the budget ended" if rec["cut"]
                                 else "done"), rec
        served += len(list((d / rec["run_dir"]).glob("points/*/rep*/member.json")))
    if not served and (look.get("steal") or 0) >= STEAL:   # the fleet check and set-up ate it (CI)
        not_judged(f"no pair served, the hypervisor took {look['steal']:.0%} of the CPU")
    assert 0 < served <= 2 * REPS - sum(look["cut"].values()), (served, look)   # less any pair that failed
