"""The machine's one TCP_INFO sampler: one process reads the flow sockets of every namespace of a
netns dumbbell, both ends of each flow, by exact lookup; a listener is not mistaken for a connection; the
fidelity monitor's reading of it (poll times, its CPU) is there; the C build and the Python sampler alike.
Two iperf3 flows of 3 s at 10 Mbit/s each time."""
from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from ccrig.commands import Commands
from ccrig.experiments.run import collectors
from ccrig.experiments.run.collectors import machine_samplers
from ccrig.topologies.named.dumbbell import DumbbellSpec
from ccrig.topologies.testbeds.netns import NetnsTestbed

pytestmark = pytest.mark.host
PREFIX = f"ccS-{os.getpid()}"
SECONDS = 3


@pytest.fixture(scope="module")
def bed():
    topo = DumbbellSpec.model_validate({"bottleneck": {"rate": "10mbit", "buffer": "50pkt"}}).build(2)
    b = NetnsTestbed(topo, Commands(None), PREFIX)
    try:
        b.up()
        yield b
    finally:
        b.down()


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_one_process_samples_both_ends_of_every_flow(bed, native, monkeypatch):
    monkeypatch.setattr(collectors, "NATIVE", native)   # the C build, or the Python sampler shipped to hosts
    flows = [SimpleNamespace(sender=s, receiver=d, client_port=41001 + i, server_port=5301 + i)
             for i, (s, d) in enumerate(bed.topology.pairs)]
    servers = [bed.popen(f.receiver, ["iperf3", "-s", "-1", "-p", str(f.server_port)]) for f in flows]
    samplers = machine_samplers(bed, flows, 0.02)
    try:
        assert len(samplers) == 1, "one sampler for every namespace of this machine"
        s = samplers[0]
        assert s.native == native
        s.wait_ready(timeout=30)
        policy = os.sched_getscheduler(s.proc.pid)
        time.sleep(0.5)   # the servers listen: a lookup that lands on the listener must report nothing
        assert not any(s.snapshot(k) for k in s.keys), "a listening socket was reported as the connection"
        clients = [bed.popen(f.sender, ["iperf3", "-c", bed.address(f.receiver), "-p", str(f.server_port),
                                        "--cport", str(f.client_port), "-t", str(SECONDS)]) for f in flows]
        for c in clients:
            c.wait(timeout=SECONDS + 30)
        time.sleep(0.2)
    finally:
        for x in samplers:
            x.stop()
        for p in servers:
            p.kill()
            p.wait()
    for f in flows:
        snd = s.snapshot(f"{f.client_port}:{f.server_port}")
        rcv = s.snapshot(f"{f.server_port}:{f.client_port}")
        assert len(snd) > SECONDS * 25, f"sender of {f.sender}: {len(snd)} samples in {SECONDS} s at 50 Hz"
        assert max(x.get("bytes_acked", 0) for _, x in snd) > 100_000
        assert max(x.get("bytes_received", 0) for _, x in rcv) > 100_000
        assert all(x["state"] not in (6, 10) for _, x in snd + rcv)
    assert len(s.poll_times) > SECONDS * 25 and s.cpu, "the sampler reports its polls and its own CPU"
    # root here: the lowest real-time priority (sampler.c says why), as it said and as the kernel has it
    assert s.sched == "fifo" and policy == os.SCHED_FIFO, (s.sched, policy)
