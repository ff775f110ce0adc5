"""The emulated PAUSE controller on a real pause_chain of namespaces (this kernel, rates scaled), real TCP.

With PAUSE on and T1 < B2, node 2's queue must stop overflowing while node 1's takes the backlog; with T1 = B2
nothing may be paused. XOFF/XON counts, the time paused and the latency samples are non-zero exactly then.
"""
import csv
import fcntl
import json
import os
import signal
import subprocess
from dataclasses import asdict

import pytest

from ccrig.commands import Commands
from ccrig.errors import RunError
from ccrig.topologies.testbeds.netns import NetnsTestbed
from ccrig.topologies.pause import chain_config, chain_controller
from ccrig.topologies.pause.emulated import EmulatedPause, Here, prometheus_samples
from ccrig.topologies.named.pause_chain import PauseChainSpec
from support import wait
from support.interrupt import terminated
from support.exposition import render

SECONDS = 5


def chain_spec(high, low, paused_rate="0", scale=10):
    # the study's chain (B1 = 10, B2 = 20, μ1 = 100, ν = 15 pps) with link A well above ν so B2 overflows
    return PauseChainSpec.model_validate({
        "name": "pause_chain", "scale": scale,
        "link_a": {"rate": "60pps"}, "link_b": {"rate": "100pps", "buffer": "10pkt"},
        "link_c": {"rate": "15pps", "buffer": "20pkt"},
        "pause": {"high": high, "low": low, "paused_rate": paused_rate}})


def qdisc(bed, node, toward):
    dev = bed.egress_device(node, toward)
    out = bed.run(node, ["tc", "-s", "-j", "qdisc", "show", "dev", dev]).stdout
    return {q["handle"]: q for q in json.loads(out)}


@pytest.fixture
def chain(tmp_path):
    beds = []

    def make(spec):
        topo = spec.build(flows=4)
        bed = NetnsTestbed(topo, Commands(tmp_path / "commands.log"), prefix=f"ccF-{os.getpid()}")
        beds.append(bed)
        bed.up()
        return bed, topo
    yield make
    for bed in beds:
        bed.down()


def run_traffic(bed, topo):
    s, d = topo.pairs[0]
    server = bed.popen(d, ["iperf3", "-s", "-1", "-p", "5399"])
    try:
        wait.listening(lambda argv: bed.run(d, argv, check=False), 5399)
        bed.run(s, ["iperf3", "-c", bed.address(d), "-p", "5399", "-t", str(SECONDS), "-P", "4", "-C", "reno"],
                timeout=SECONDS + 30)
    finally:
        server.kill()
        server.wait()


def test_pause_moves_the_backlog_upstream(chain, tmp_path):
    spec = chain_spec(high=12, low=8)
    bed, topo = chain(spec)
    ctl = chain_controller(spec, topo, bed, bed.commands, events_csv=tmp_path / "events.csv")
    ctl.start()
    try:
        assert qdisc(bed, "n1", "n2")["1:"]["kind"] == "tbf"
        run_traffic(bed, topo)
    finally:
        stats = ctl.stop()
    q1, q2 = qdisc(bed, "n1", "n2")["10:"], qdisc(bed, *topo.bottleneck)["10:"]
    assert stats.xoff > 3 and stats.xon >= stats.xoff - 1
    assert stats.paused_s > 0.1 and not stats.paused
    assert len(stats.latency_s) == stats.xoff + stats.xon + stats.expiries
    assert all(0 < x < 1.0 for x in stats.latency_s)
    # node 2's queue stays below its buffer (XOFF at T1 + 1 = 13 lets one more packet go; a busy machine may
    # delay the controller by a few more packets at μ1)...
    assert q2["drops"] <= 2, q2
    # ...unless the controller was late by the 7 packets it takes to fill B2: at scale 10 B2 fills at (μ1 - ν) x 10
    # = 850 packets/s, 8.2 ms (CI 2026-12-07, three workers beside TCG guests: occupancy 20); its lateness is
    # measured (the longest gap between its looks, and the slowest rate change from decision to tbf in force)
    late_s = stats.longest_gap_s + max(stats.latency_s)
    assert stats.max_occupancy < 20 or late_s > 7 / ((100 - 15) * 10), (stats.max_occupancy, late_s)
    # ...and node 1 took the backlog instead
    assert q1["drops"] > 10 * q2["drops"], q1
    rows = list(csv.DictReader(open(tmp_path / "events.csv")))
    assert {r["event"] for r in rows} == {"xoff", "xon"}
    assert all(int(r["occupancy"]) > 12 for r in rows if r["event"] == "xoff")
    assert all(int(r["occupancy"]) < 8 for r in rows if r["event"] == "xon")
    # its statistics as Prometheus series pass promtool
    text = render(prometheus_samples(stats, {"experiment": "t", "run": "r", "point": "0", "node": "n2"}))
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # stop() left link B at μ1
    tbf = qdisc(bed, "n1", "n2")["1:"]
    assert tbf["options"]["rate"] == round(spec.rate_bps(spec.link_b.rate) / 8)


def test_no_pause_when_high_equals_the_buffer(chain, tmp_path):
    spec = chain_spec(high=20, low=20)
    bed, topo = chain(spec)
    with chain_controller(spec, topo, bed, bed.commands) as ctl:
        run_traffic(bed, topo)
    stats = ctl.stats()
    q2 = qdisc(bed, *topo.bottleneck)["10:"]
    assert (stats.xoff, stats.xon, stats.paused_s, stats.latency_s) == (0, 0, 0.0, [])
    assert stats.max_occupancy == 20 and stats.polls > 0
    assert q2["drops"] > 0, q2


def test_missing_downstream_queue_is_a_clear_error(chain):
    spec = chain_spec(high=12, low=8)
    bed, topo = chain(spec)
    cfg = chain_config(spec, topo, bed)
    cfg.down_handle = "77:"
    with pytest.raises(RunError, match=r"qdisc 77:.*No such file"):
        EmulatedPause(cfg, bed.commands).start()
    # the failed start left link B running at μ1
    assert qdisc(bed, "n1", "n2")["1:"]["options"]["rate"] == round(spec.rate_bps(spec.link_b.rate) / 8)


def test_quanta_mode_refreshes_and_expires(chain, tmp_path):
    """802.3x semantics on the emulated link: an XOFF pauses for its quanta only. Refreshed at half the pause
    time it holds node 1 until the XON; refreshed too late, node 1 resumes on its own (an expiry) in between."""
    spec = chain_spec(high=12, low=8)
    spec.pause.quanta = 500   # 500 x 512 bit at 12.1 Mbit/s = 21 ms, less than draining 13 -> 7 at 150 pkt/s
    bed, topo = chain(spec)
    with chain_controller(spec, topo, bed, bed.commands, events_csv=tmp_path / "held.csv") as ctl:
        run_traffic(bed, topo)
    held = ctl.stats()
    assert held.xoff > 0 and held.refreshes > 0 and held.expiries == 0
    assert qdisc(bed, *topo.bottleneck)["10:"]["drops"] <= 2
    events = [r["event"] for r in csv.DictReader(open(tmp_path / "held.csv"))]
    assert "refresh" in events and events.count("xoff") == held.xoff

    cfg = chain_config(spec, topo, bed)
    cfg.refresh = 0.2          # ten times the pause time: the pause runs out first
    drops_before = qdisc(bed, *topo.bottleneck)["10:"]["drops"]
    with EmulatedPause(cfg, bed.commands, events_csv=tmp_path / "late.csv") as ctl:
        run_traffic(bed, topo)
    late = ctl.stats()
    assert late.expiries > 0
    events = [r["event"] for r in csv.DictReader(open(tmp_path / "late.csv"))]
    assert events.count("expiry") == late.expiries
    # node 1 runs at μ1 again while node 2 is still above T2: its queue fills up and overflows
    assert late.max_occupancy == 20
    assert qdisc(bed, *topo.bottleneck)["10:"]["drops"] > drops_before


def test_stop_restores_the_link_after_the_controller_died(chain):
    """The controller process killed mid-run (possibly with node 1 paused): stop() still puts link B back at
    μ1 and returns what was counted."""
    import signal

    spec = chain_spec(high=12, low=8)
    bed, topo = chain(spec)
    s, d = topo.pairs[0]
    ctl = chain_controller(spec, topo, bed, bed.commands)
    ctl.start()
    server = bed.popen(d, ["iperf3", "-s", "-1", "-p", "5396"])
    client = None
    try:
        wait.listening(lambda argv: bed.run(d, argv, check=False), 5396)
        client = bed.popen(s, ["iperf3", "-c", bed.address(d), "-p", "5396", "-t", "3", "-P", "4", "-C", "reno"])
        wait.until(lambda: ctl.stats().xoff, 10, "the controller's first XOFF")
        os.kill(ctl.proc.pid, signal.SIGKILL)
        stats = ctl.stop()
    finally:
        for p in (client, server):
            if p is not None:
                p.kill()
                p.wait()
    assert stats.xoff > 0
    assert ctl.proc.returncode == -signal.SIGKILL
    assert qdisc(bed, "n1", "n2")["1:"]["options"]["rate"] == round(spec.rate_bps(spec.link_b.rate) / 8)


F_SETPIPE_SZ = 1031   # fcntl.h: a pipe's capacity (one page at least)


def test_a_reader_that_stops_reading_does_not_hold_the_controller(chain):
    """The runner reads the controller's pipe when the CPU scheduler lets it: on a machine the pairs side by side
    fill, not for seconds. Here nobody reads during the traffic and the pipe holds one page (the events of about
    a second): the controller must keep looking at the queue all along, and every event must still arrive once
    the reader is back. Blocked in write(), it held pauses for 1.2 and 3.2 s in study 000's run AB."""
    spec = chain_spec(high=12, low=8)
    bed, topo = chain(spec)
    cfg = chain_config(spec, topo, bed)
    here = Here(bed.commands, cfg)
    here.up.run(["tc", "qdisc", "del", "dev", cfg.up_dev, "root"], check=False)
    for argv in cfg.tbf_argv(cfg.rate_bps):
        here.up.run(argv)
    proc = here.popen("controller", [json.dumps(asdict(cfg))])
    with terminated(proc, timeout=30) as ended:
        fcntl.fcntl(proc.stdout.fileno(), F_SETPIPE_SZ, 4096)
        assert "ready" in json.loads(proc.stdout.readline())
        run_traffic(bed, topo)          # 5 s of 4 flows; the pipe unread
    out = ended.out
    msgs = [json.loads(line) for line in out.splitlines()]
    final = next(m["final"] for m in msgs if "final" in m)
    events = [m for m in msgs if "event" in m]
    assert final["xoff"] > 3 and len(events) == final["xoff"] + final["xon"] + final["refreshes"] + final["expiries"]
    assert len(out) > 4096                        # more than the pipe held: the reader was needed
    # looks at most max_sleep (10 ms) apart, a busy machine's scheduling aside; blocked, it was the traffic's 5 s
    assert final["longest_gap_s"] < 1.0, final
    assert 0 < final["cpu_s"] < final["elapsed_s"]
