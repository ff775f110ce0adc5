"""Pairs side by side (`ccrig run --jobs N`, experiments/run/engine.py): every pair of a run measured in a process
of its own under names of its own, the same answers as one at a time, the run's records as before; Ctrl-C and
SIGTERM stop every pair and leave nothing behind."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import ROOT, dumbbell, leftovers


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
    assert len(reps) == 8 and all(r["fidelity"]["verdict"] == "ok" for r in reps)
    # each pair measured against its own link, side by side or not
    for p, rate in zip(summary["points"], (10e6, 20e6)):
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
    assert time.monotonic() - t < 15
    assert "Traceback" not in err
    assert leftovers(p.pid) == []
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"ccrig-{p.pid}-")]
