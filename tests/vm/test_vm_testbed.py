"""The `vm` testbed end to end, in one boot: a spec that needs netem (20 ms of RTT) and RED, which this
machine's kernel lacks, runs as `ccrig run` on the netns testbed inside the guest; its run directory lands on
the host with the guest kernel recorded, the path RTT it measured is within 10 % of the configured delay, its
random loss is the BPF program's in the guest too (netem there, but netem would drop the rig's control
connections like data), and its samples become queryable in the host's Prometheus by backfill."""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from ccrig import machine
from ccrig.experiments.telemetry.backfill import LOG_NAME
from ccrig.experiments.telemetry.prometheus_server import PrometheusServer, query
from ccrig.topologies.testbeds import vm
from support.interrupt import default_sigint

ROOT = Path(__file__).resolve().parents[2]
CCRIG = [sys.executable, "-c", "from ccrig.experiments.cli.entry import main; main()"]
RTT = 0.020
# RED's thresholds are small so the queue adds at most max / rate = 9000 B / 10 Mbit/s = 7.2 ms to the RTT
SPEC = {
    "name": "vm-red-delay",
    "description": "vm testbed: one reno flow, 10 Mbit/s RED bottleneck, 20 ms RTT, 1 % loss",
    "testbed": "vm",
    "topology": {"name": "dumbbell", "rtt": "20ms", "loss": 0.01,
                 "bottleneck": {"rate": "10mbit", "buffer": "100pkt",
                                "qdisc": {"kind": "red", "min": 3000, "max": 9000}}},
    "flows": [{"cc": "reno"}],
    "duration": "10s",
    "interval": "1s",
    "warmup": 2,
    "repetitions": 1,
}


@pytest.mark.vm
@pytest.mark.timeout(1500)
def test_spec_needing_netem_and_red_runs_in_the_guest(tmp_path, capsys):
    """`testbed: auto` on this machine (no netem, no red) picks vm, says why, and runs it end to end."""
    import subprocess
    import sys
    spec = tmp_path / "vm-red-delay.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "testbed": "auto"}))
    out = tmp_path / "runs"
    prom = tmp_path / "prometheus"
    argv = [sys.executable, "-c", "from ccrig.experiments.cli.app import main; main()", "run", str(spec), "--out", str(out),
            "--prometheus-dir", str(prom), "--no-progress"]
    with capsys.disabled():
        print("\n[vm] ccrig run with testbed auto", flush=True)
        p = subprocess.run(argv, cwd=vm.REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=1400)
        print(p.stdout[-3000:], flush=True)
    server = PrometheusServer(prom)
    try:
        assert p.returncode == 0, p.stdout[-2000:]
        assert "testbed auto: vm, because" in p.stdout and "netem" in p.stdout
        runs = [d for d in out.iterdir() if d.is_dir()]
        assert len(runs) == 1
        run_dir = runs[0]
        env = json.loads((run_dir / "env.json").read_text())
        assert env["testbed"] == "vm"
        kernel = vm.find_kernel(None)
        assert env["kernel"]["release"] == kernel.release          # written inside the guest
        assert env["vm"]["kernel"]["config_sha256"] == kernel.config_sha256()
        assert env["vm"]["virtualisation"] in ("kvm", "tcg")
        assert env["git"] == machine.git_revision()               # handed in by the host, not read over 9p
        assert env["tools"] == machine.tool_versions() and env["tools"]["tc"]   # the host's files, read by the host
        realised = {link: e["realised_by"] for link, e in env["links"]["0"]["loss"].items()}
        assert realised and all(r.startswith("bpf") for r in realised.values()), realised
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["complete"] and summary["testbed"] == "vm"
        assert summary["points"][0]["system"]["loss"]["mean"] > 0   # the program's drops, counted
        system = summary["points"][0]["system"]
        # the path's RTT is TCP's own minimum (tcpi_min_rtt: no queueing in it): within 10 % of the configured
        # 20 ms, and netem never delivers early
        base = system["min_rtt_s"]["mean"]
        assert base is not None and RTT <= base <= 1.1 * RTT, f"measured min RTT {base} s for {RTT} s configured"
        # the smoothed RTT adds the RED queue and whatever an emulated CPU on a busy host adds, which has no bound
        # (35 ms seen alone, 49 ms beside other guests, 351 ms in CI at 2539670, its guest starved for seconds):
        # never below the path's minimum. RED is what the kernel ran at the bottleneck (its own statistics,
        # sampled every interval: kind red, with RED's counters); RED holding its queue is the guest tier's
        # (tests/vm/guest/test_qdiscs.py)
        rtt = system["rtt_s"]["mean"]
        assert rtt is not None and base <= rtt, f"measured RTT {rtt} s below the path's minimum {base} s"
        with open(run_dir / "points/000/rep0/qdisc.csv") as f:
            red = [r for r in csv.DictReader(f) if r["kind"] == "red"]
        assert red and all(r["red_early"] != "" for r in red), "the bottleneck's statistics show no RED"
        assert summary["points"][0]["system"]["goodput_bps"]["mean"] > 0
        assert (run_dir / LOG_NAME).is_file(), "the guest's runner kept no sample log for the backfill"
        assert server.url, "ccrig run left no Prometheus server running"
        # the server started again in the same storage loads the backfilled blocks at its start; a running
        # server's own reload (once a minute, up to a minute of this critical path waiting) is the host tier's
        # (tests/host/test_backfill.py): the blocks and their series are the same
        server.stop()
        url = server.ensure(summary["interval_s"])
        promql = f'count_over_time(ccrig_flow_goodput_bytes_per_second{{run="{run_dir.name}"}}[1h])'
        found = query(url, promql)
        assert found and float(found[0]["value"][1]) == summary["intervals"], found
    finally:
        server.stop()


@pytest.mark.vm
@pytest.mark.timeout(300)
def test_a_guest_stopped_at_its_bound_says_why_and_leaves_its_output(tmp_path):
    """A study's guest that outlives its bound (here 3 s: no TCG boot is that fast) is stopped; its specs then
    fail with the reason instead of the whole by-kernel column losing its study, what it said is in guest.log,
    and no guest is left running."""
    name = f"cvmb-{os.getpid()}"
    status, mark = vm.VmTestbed.run_specs_elsewhere(["--version"], tmp_path, None, timeout=3, name=name)
    assert isinstance(status, str) and "within 3 s; it was stopped" in status and "guest.log" in status, status
    assert (tmp_path / "guest.log").is_file() and callable(mark)
    assert vm.stray_guests(name) == []
    # nor virtme-run's files (its exit status file outlived a stopped guest in /tmp before)
    assert list(Path(tempfile.gettempdir()).glob(f"{name}*")) == []


@pytest.mark.vm
@pytest.mark.timeout(600)
def test_sigterm_stops_the_guest_and_keeps_what_it_wrote(tmp_path):
    """`ccrig run` on the vm testbed ended by SIGTERM mid-run (a job scheduler's way) stops its guest as Ctrl-C
    does: SIGTERM's default ended the host process at once and left the guest running its run for minutes."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "duration": "120s", "topology": {**SPEC["topology"], "loss": 0}}))
    out = tmp_path / "runs"
    p = subprocess.Popen([*CCRIG, "run", str(spec), "--out", str(out), "--no-progress", "--prometheus", "off"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=default_sigint)
    try:
        # ready: the guest's own run has begun measuring (its first interval is in the shared folder)
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and not list(out.glob("*/points/*/rep0/intervals.csv")):
            assert p.poll() is None, p.communicate()
            time.sleep(0.5)
        assert vm.stray_guests(f"ccrig-{p.pid}"), "the guest should be running mid-run"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 143, err
    assert "interrupted (SIGTERM); the guest was stopped" in err, err
    assert vm.stray_guests(f"ccrig-{p.pid}") == []
    assert list(out.glob("*/spec.yaml")), "the guest's run directory stays"
