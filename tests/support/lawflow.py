"""One TCP flow of a congestion-control law through a real bottleneck, with the data socket's TCP_INFO trace, and
what a law test reads from it: the losses (window at the loss, the ssthresh the law set) and the growth per round
trip. Shared by tests/host/test_cc_bpf.py, test_cc_poly_paper.py and test_bpf_repair.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from ccrig.commands import Commands
from ccrig.experiments.run import mib
from ccrig.ports import CLIENT_PORT, SERVER_PORT
from ccrig.tcp_modules import bpf_fault
from ccrig.tcp_modules.manager import CcManager
from ccrig.topologies.loss import program
from ccrig.topologies.named.dumbbell import DumbbellSpec
from ccrig.topologies.testbeds.netns import NetnsTestbed
from support import wait

SAMPLER = Path(__file__).resolve().parents[2] / "experiments" / "nodes" / "sampler.py"
SECONDS = 4
OPEN, RECOVERY, LOSS = 0, 3, 4   # tcp_info ca_state: TCP_CA_Open, TCP_CA_Recovery, TCP_CA_Loss


def bpf_skip_reason(prefix: str, cc: str) -> str | None:
    """Why this machine cannot run a test of cc as BPF (not root, or what CcManager's preflight finds missing),
    None when it can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, bpftool struct_ops)"
    return "; ".join(CcManager(Commands(None), prefix, "bpf").preflight([cc])) or None


@contextmanager
def bottleneck(prefix: str, buffer_packets: int, rate: str = "10mbit"):
    """One sender -> router (htb at rate, 10 Mbit/s unless said, + pfifo of buffer_packets, wire-sized packets)
    -> one receiver on the netns testbed, torn down afterwards."""
    topo = DumbbellSpec.model_validate({"bottleneck": {"rate": rate, "buffer": f"{buffer_packets}pkt"}}).build(1)
    bed = NetnsTestbed(topo, Commands(None), prefix)
    try:
        bed.up()
        yield bed
    finally:
        bed.down()


def run_flow(bed: NetnsTestbed, cc: str, seconds: float = SECONDS,
             during: Callable[[], None] | None = None) -> tuple[dict, list[tuple[float, dict]]]:
    """One iperf3 flow s1 -> d1 using cc, flow 0's ports (ccrig/ports.py: the loss program's to drop), during()
    called while it runs; returns iperf3's JSON and the data socket's TCP_INFO samples."""
    s, d = bed.topology.pairs[0]
    server = bed.popen(d, ["iperf3", "-s", "-1", "-p", str(SERVER_PORT)])
    # to a file, not a pipe: a pipe nobody reads during the flow fills up and stalls the sampler
    with tempfile.TemporaryFile() as trace:
        sampler = bed.popen(s, [sys.executable, str(SAMPLER), "--period", "0.01"], stdout=trace)
        try:
            # start the flow only once the sampler samples (a busy machine can take a second to start
            # Python), so slow start and the first loss are in the trace
            deadline = time.monotonic() + 20
            while os.fstat(trace.fileno()).st_size == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            wait.listening(lambda argv: bed.run(d, argv, check=False), SERVER_PORT, timeout=30)
            client = bed.popen(s, ["iperf3", "-c", bed.address(d), "-p", str(SERVER_PORT), "--cport",
                                   str(CLIENT_PORT), "-t", str(seconds), "-C", cc, "-J"], stdout=subprocess.PIPE)
            try:
                if during is not None:
                    during()
                out, _ = client.communicate(timeout=seconds + 30)
                assert client.returncode == 0, f"iperf3 client with {cc}: exit {client.returncode}: {out[-500:]!r}"
            finally:
                if client.poll() is None:
                    client.kill()
                    client.wait(timeout=10)
        finally:
            sampler.terminate()
            sampler.wait(timeout=10)
            server.kill()
            server.wait(timeout=10)
        trace.seek(0)
        raw = trace.read()
    per_key: dict[str, list] = {}
    for line in raw.decode().splitlines():
        rec = json.loads(line)
        for key, f in rec["s"].items():
            if key.endswith(f":{SERVER_PORT}"):
                per_key.setdefault(key, []).append((rec["t"], f))
    # the data connection is the one that moved the bytes (the other is iperf3's control connection)
    key = max(per_key, key=lambda k: per_key[k][-1][1].get("bytes_acked", 0))
    return json.loads(out), per_key[key]


def law_flow(bed: NetnsTestbed, cc: str, seconds: float = SECONDS, during: Callable[[], None] | None = None):
    """run_flow, and the runs of its samples that the kernel's BPF struct_ops fault left alone
    (tcp_modules/bpf_fault.py: a skipped ssthresh callback leaves a garbage ssthresh, and the window is the
    fault's until congestion avoidance resumes). The law is read from those runs only; what was cut out is
    counted and printed. A plain flow (no during()) the fault took more than half of is followed by another
    (two more at most), whose clean runs are added to the first's, never put in their place: CI at 6d9e006 had
    a 4-s poly_piad flow lose 395 of its 569 samples, 3.2 s in one episode, too few round trips left to read the
    increase from. Returns the first flow's iperf3 JSON and samples, and the clean runs of all."""
    result, samples = run_flow(bed, cc, seconds, during)
    runs, excluded = clean_flow_runs(cc, samples)
    taken, flows = excluded / max(1, len(samples)), 1
    while during is None and taken > 0.5 and flows < 3:
        more = run_flow(bed, cc, seconds)[1]
        clean, excluded = clean_flow_runs(cc, more)
        runs += clean
        taken, flows = excluded / max(1, len(more)), flows + 1
    return result, samples, runs


def clean_flow_runs(cc: str, samples) -> tuple[list[list], int]:
    """bpf_fault.clean_runs of one flow's samples, printing what the fault took."""
    runs, excluded = bpf_fault.clean_runs(samples)
    if excluded:
        print(f"{cc}: {excluded} of {len(samples)} samples excluded, the kernel's BPF struct_ops fault "
              f"{bpf_fault.spans(samples)}")
    return runs, excluded


def loss_events(samples) -> list[tuple[int, int, int | None]]:
    """(W, ssthresh, cwnd after) for each loss: a loss is the connection entering Recovery or Loss; W is
    the largest cwnd seen in the Open state since the previous one, ssthresh the value the law set, and
    cwnd after the first Open cwnd once recovery is over (None if the trace ends first). The first loss
    ends slow start, whose W the 10 ms samples underestimate: callers usually drop it."""
    events, since, prev_state = [], [], OPEN
    for t, f in samples:
        state = f["ca_state"]
        if state in (RECOVERY, LOSS) and prev_state not in (RECOVERY, LOSS) and since:
            events.append([max(since), f["snd_ssthresh"], None])
            since = []
        if state == OPEN:
            if events and events[-1][2] is None and prev_state != OPEN:
                events[-1][2] = f["snd_cwnd"]
            since.append(f["snd_cwnd"])
        prev_state = state
    return [tuple(e) for e in events]


def run_events(runs, keep_first_if_fewer: int = 0) -> list[tuple[int, int, int | None]]:
    """loss_events of each clean run of a trace, without the run's first event: the trace's first ends slow
    start, whose W the samples underestimate, and after a fault the law has only just taken over again. A run
    with fewer than keep_first_if_fewer events keeps its first."""
    out = []
    for run in runs:
        events = loss_events(run)
        out += events if len(events) < keep_first_if_fewer else events[1:]
    return out


def growth_per_rtt(runs) -> tuple[float, float]:
    """Mean cwnd increase per round trip in congestion avoidance, and the mean cwnd it was measured at, over
    the clean runs of a trace. A round trip is what the laws mean by one: a window of acknowledged segments
    (tcpi_delivered / cwnd), so queueing-delay swings in srtt do not bias it. Counted over consecutive
    samples of one run, both Open, in congestion avoidance (cwnd >= ssthresh) and with no decrease between
    them."""
    grow = rounds = wsum = 0.0
    pairs = [pair for run in runs for pair in zip(run, run[1:])]
    for (_, a), (_, b) in pairs:
        if a["ca_state"] != OPEN or b["ca_state"] != OPEN or a["snd_cwnd"] < a["snd_ssthresh"]:
            continue
        if b["snd_ssthresh"] != a["snd_ssthresh"] or b["snd_cwnd"] < a["snd_cwnd"]:
            continue
        w = (a["snd_cwnd"] + b["snd_cwnd"]) / 2
        r = (b["delivered"] - a["delivered"]) / w
        grow += b["snd_cwnd"] - a["snd_cwnd"]
        rounds += r
        wsum += w * r
    assert rounds > 3, "too few round trips in congestion avoidance to measure the increase"
    return grow / rounds, wsum / rounds


def through_blackout(bed: NetnsTestbed, cc: str, seconds: float = 7, down_at: float = 2.0,
                     down_for: float = 1.0) -> tuple[list[tuple[float, dict]], float, int]:
    """One flow (law_flow) whose path goes down for down_for seconds, down_at seconds into it: the loss program
    drops every packet into the receiver, so the sender's retransmission timer fires and backs off. Returns the
    clean runs' samples, the time the path came back and the timeouts the sender's MIB counted
    (experiments/run/mib.py)."""
    s, d = bed.topology.pairs[0]
    # on the receiver's ingress from its router (bottleneck(): s1 - r1 - r2 - d1): a drop at the sender's own
    # egress is no loss to TCP, which sends the skb again as new data
    drop = program.LinkDropper(bed, "r2", d, bed.egress_device(d, "r2"), hook="ingress")
    drop.attach(program.build(bed.commands))
    back: list[float] = []

    def blackout():
        time.sleep(down_at)
        drop.set_down(True)
        time.sleep(down_for)
        drop.set_down(False)
        back.append(time.time())

    before = mib.read(bed, [s])
    _, _, runs = law_flow(bed, cc, seconds, blackout)
    return [x for run in runs for x in run], back[0], mib.delta(before, mib.read(bed, [s]))[s]["timeouts"]
