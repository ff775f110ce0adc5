"""Pairs side by side (`ccrig run --jobs N`, experiments/run/engine.py): every pair of a run measured in a process
of its own under names of its own, the same answers as one at a time, the run's records as before; Ctrl-C and
SIGTERM stop every pair and leave nothing behind. Under --jobs auto (the default) pairs are admitted by their cost
against this machine's calibrated capacity, and a repetition spoiled beside others is rerun alone."""
import json
import os
import platform
import signal
import subprocess
import time
from pathlib import Path

from conftest import ROOT, dumbbell, leftovers
from support.interrupt import SIGNAL_BOUND
from support.machine import machine_reasons, measured

from ccrig.experiments.run import calibration


def _reps(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run.glob("points/*/rep*/repetition.json"))]


def test_four_repetitions_two_at_a_time(ccrig):
    spec = dumbbell([{"cc": "reno"}, {"cc": "cubic"}], duration="5s", repetitions=4,
                    sweep={"topology.bottleneck.rate": ["10mbit", "20mbit"]})
    done = ccrig.run(spec, "--jobs", "2")
    assert done.returncode == 0, done.stderr
    run = ccrig.run_dirs()[-1]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] and summary["jobs"] == 2
    assert [len(p["repetitions"]) for p in summary["points"]] == [4, 4]
    reps = _reps(run)
    # each verdict ok or, for a pair the machine starved in every attempt (CI under the hypervisor's steal),
    # limited by the machine (measured() fails on any other reason), its point then unmeasurable, as it says
    assert len(reps) == 8
    starved = {int(f.parts[-3]) for f in run.glob("points/*/rep*/repetition.json")
               if not measured(json.loads(f.read_text())["fidelity"])}
    assert {i for i, p in enumerate(summary["points"]) if "unmeasurable" in p} == starved, summary["points"]
    # each pair measured against its own link, side by side or not
    for i, (p, rate) in enumerate(zip(summary["points"], (10e6, 20e6))):
        if i in starved:
            continue
        g = p["system"]["goodput_bps"]["mean"]
        assert 0.85 * rate * 1448 / 1514 < g < 1.02 * rate, (rate, g)
        assert p["system"]["goodput_bps"]["ci"]["method"] == "runs"
    # two slots' names, each pair's commands in its own folder; the run's env.json got every point's setup
    logs = [p.read_text() for p in run.glob("points/*/rep*/commands.log")]
    assert len(logs) == 8
    slots = {s for log in logs for s in ("-j0-", "-j1-") if f"ccrig-{done.pid}{s}" in log}
    assert slots == {"-j0-", "-j1-"}
    env = json.loads((run / "env.json").read_text())
    assert set(env["sender_tcp"]) == {"0", "1"} and "topology" in env
    assert leftovers(done.pid) == []


def test_sigterm_stops_every_pair_and_leaves_nothing(ccrig):
    spec = ccrig.write(dumbbell([{"cc": "reno"}] * 4, duration="20s", repetitions=4))
    p = subprocess.Popen(ccrig.argv(spec, "--jobs", "2"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # both pairs measuring: each has written its first interval
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len([f for f in (ccrig.tmp / "runs").glob("*/points/*/rep*/intervals.csv")
                                               if len(f.read_text().splitlines()) > 3]) < 2:
        time.sleep(0.1)
    p.send_signal(signal.SIGTERM)
    t = time.monotonic()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert time.monotonic() - t < SIGNAL_BOUND
    assert "Traceback" not in err
    assert leftovers(p.pid) == []
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"ccrig-{p.pid}-")]



def _pair_processes(pid: int) -> list[int]:
    """The run's pair processes: its children forked from it (the same command line), not the programs it runs."""
    own = Path(f"/proc/{pid}/cmdline").read_bytes()
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    out = []
    for k in kids:
        try:
            if Path(f"/proc/{k}/cmdline").read_bytes() == own:
                out.append(int(k))
        except OSError:
            pass
    return out


def test_a_pair_whose_process_dies_has_its_slot_swept_before_the_next_pair(ccrig):
    # a pair's process killed outright (SIGKILL: no teardown of its own) leaves its namespaces, iperf3s and
    # delay lines; its slot's names are the next pair's, which could not be set up over them
    spec = ccrig.write(dumbbell([{"cc": "reno"}], duration="6s", repetitions=4, seed=3))
    p = subprocess.Popen(ccrig.argv(spec, "--jobs", "2"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not [f for f in (ccrig.tmp / "runs").glob("*/points/*/rep*/intervals.csv")
                                               if len(f.read_text().splitlines()) > 2]:
        time.sleep(0.1)
    pairs = _pair_processes(p.pid)
    assert pairs, "no pair process found"
    os.kill(pairs[0], signal.SIGKILL)
    out, err = p.communicate(timeout=240)
    run = ccrig.run_dirs()[-1]
    summary = json.loads((run / "summary.json").read_text())
    (point,) = summary["points"]
    # the killed pair is a failure with its reason; its slot was swept (said), and every other pair measured
    (failed,) = point["failed_repetitions"]
    assert "without a record" in failed["failed"], failed
    assert "left behind" in err and "removed namespace" in err, err
    assert len(point["repetitions"]) == 3, (point["repetitions"], err)
    assert leftovers(p.pid) == []
    assert p.returncode in (0, 1), err

# --- admission by measured capacity, reruns, the calibration (--jobs auto) --------------------------------------

CBR = [{"workload": {"kind": "cbr", "rate": "2mbit"}}] * 2   # cheap traffic whatever the link's rate: never greedy


def test_admission_keeps_a_heavy_pair_alone(ccrig):
    # point 0 at 10 Mbit/s costs a few thousand packets/s; point 1's 10 Gbit/s link more than any calibration of a
    # machine like this (its traffic is 4 Mbit/s all the same: the cost is what the link lets the flows send).
    # Seed 5 orders the pairs (0,0) (0,1) (1,1) (1,0): the two cheap ones start together, each heavy one alone
    spec = dumbbell(CBR, duration="3s", repetitions=2, seed=5,
                    sweep={"topology.bottleneck.rate": ["10mbit", "10gbit"]})
    done = ccrig.run(spec)   # --jobs auto is the default
    assert done.returncode == 0, done.stderr
    run = ccrig.run_dirs()[-1]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["jobs"] >= 2 and "reruns" not in summary, summary.get("reruns")
    cost = summary["admission"]["pair_cost_pps"]
    assert cost["1"] > summary["admission"]["capacity_pps"] > 2 * cost["0"]
    beside = {(p["index"], r["rep"]): r["ran_beside_others"] for p in summary["points"] for r in p["repetitions"]}
    assert beside == {(0, 0): True, (0, 1): True, (1, 0): False, (1, 1): False}, beside
    env = json.loads((run / "env.json").read_text())
    assert env["calibration"]["key"] == calibration.key() and env["calibration"]["capacity_pps"] > 0
    assert leftovers(done.pid) == []


def _forced(ccrig, spec: dict):
    env = {**os.environ, "CCRIG_FORCE_INTERFERENCE": "1"}
    return subprocess.Popen(ccrig.argv(ccrig.write(spec), "--jobs", "2"), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_a_testbed_limited_repetition_beside_others_is_rerun_alone_and_recorded(ccrig):
    p = _forced(ccrig, dumbbell([{"cc": "reno"}, {"cc": "cubic"}], duration="3s", repetitions=2))
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err
    run = ccrig.run_dirs()[-1]
    summary = json.loads((run / "summary.json").read_text())
    # both first attempts ran side by side, were judged testbed-limited, moved aside and run again alone
    reruns = sorted(summary["reruns"], key=lambda r: (r["rep"], r["attempt"]))
    first = [r for r in reruns if r["attempt"] == 1]
    assert [(r["rep"], r["beside_others"], r["rerun"]) for r in first] == [(0, True, "alone"), (1, True, "alone")], \
        reruns
    # an attempt alone is forced clean, but a machine this busy (a TCG guest beside this test in CI) may still
    # starve it for real: the engine then runs it alone once more, as it says
    assert all(not r["beside_others"] and "forced" not in r["spoiled"] for r in reruns if r["attempt"] > 1), reruns
    assert all("testbed-limited" in r["spoiled"] for r in reruns)
    # a pair starved alone in every attempt (CI under the hypervisor's steal) is given up on, its last attempt
    # kept as its record and its point unmeasurable: only for a reason that blames the machine
    given_up = [r for r in reruns if "kept" in r]
    assert all(not r["beside_others"] and machine_reasons(r["spoiled"]) for r in given_up), given_up
    for r in reruns:
        if r in given_up:
            continue
        kept = json.loads((run / r["excluded"] / "repetition.json").read_text())
        assert kept["excluded"] == r["spoiled"] and (run / r["excluded"] / "intervals.csv").is_file()
    # what stands is each pair's second attempt, alone, its own verdict ok, and the point measured
    point = summary["points"][0]
    if given_up:
        assert point["unmeasurable"], point
    else:
        last = {r["rep"]: r["attempt"] for r in reruns}
        assert [(r["rep"], r["attempt"], r["ran_beside_others"], r["fidelity"]["verdict"])
                for r in point["repetitions"]] == [(k, last[k] + 1, False, "ok") for k in (0, 1)]
        assert "unmeasurable" not in point and point["fidelity"]["verdict"] == "ok"
    assert sorted(p.parent.name for p in run.glob("points/*/rep*/repetition.json")) == ["rep0", "rep1"]
    assert "running it again alone" in out
    # the sample log holds each repetition once: the excluded attempts' samples left it
    series: dict = {}
    for line in (run / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        if s["name"] == "flow_goodput_bytes_per_second":
            key = (s["labels"]["rep"], s["labels"]["flow"])
            series[key] = series.get(key, 0) + 1
    assert series == {(r, f): 3 for r in "01" for f in "01"} and summary["excluded_samples_dropped"] > 0, series
    assert leftovers(p.pid) == []


def test_sigterm_during_a_rerun_leaves_nothing(ccrig):
    p = _forced(ccrig, dumbbell([{"cc": "reno"}] * 2, duration="20s", repetitions=2))
    # a rerun measuring: an attempt moved aside, and a pair's folder filling again
    deadline = time.monotonic() + 150
    runs = ccrig.tmp / "runs"
    while time.monotonic() < deadline and not (
            list(runs.glob("*/points/000/excluded/*/repetition.json")) and
            [f for f in runs.glob("*/points/000/rep*/intervals.csv") if len(f.read_text().splitlines()) > 2]):
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert "Traceback" not in err
    assert leftovers(p.pid) == []


def test_the_calibration_is_cached_per_kernel_and_cpu_and_reused(tmp_path):
    said: list[str] = []
    prefix = f"ccrig-{os.getpid()}-cal"
    first = calibration.capacity(tmp_path, prefix, said.append)
    assert len(said) == 2 and "calibrating" in said[0] and "calibrated" in said[1], said
    assert (tmp_path / f"{calibration.key()}.json").is_file()
    assert calibration.key().startswith(platform.release() + "-")
    assert first["kernel"] == platform.release() and first["cpus"] == os.cpu_count()
    assert first["cpu_model"] == calibration.cpu_model()
    # the capacity is the highest round that passed (its pairs at 0.98 of T_max or better), or without one the last
    rounds = first["rounds"]
    assert rounds and first["pairs"] == calibration.PAIRS and all(r["pairs"] == calibration.PAIRS for r in rounds)
    passed = [r for r in rounds if r["passed"]]
    assert all(r["goodput_of_t_max"] >= calibration.FULL for r in passed)
    assert first["capacity_pps"] == (max(r["offered_pps"] for r in passed) if passed else rounds[-1]["offered_pps"])
    assert first["passed"] == bool(passed)
    # reused: nothing measured, nothing said
    stamp = (tmp_path / f"{calibration.key()}.json").stat().st_mtime_ns
    assert calibration.capacity(tmp_path, prefix, said.append) == first and len(said) == 2
    assert (tmp_path / f"{calibration.key()}.json").stat().st_mtime_ns == stamp
    # another kernel's or CPU's file is not this machine's
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "5.10.0-other-0123456789ab.json").write_text(json.dumps(first))
    assert calibration.cached(other) is None
    assert leftovers(os.getpid()) == []
