"""The pause_chain with an RTT (netem, which the vm tier's kernel has) and the emulated PAUSE controller."""
from __future__ import annotations

import json
import os
import re
import time

from ccrig.topologies.testbeds.netns import NetnsTestbed
from ccrig.topologies.pause import chain_controller
from ccrig.topologies.named.pause_chain import PauseChainSpec


def test_chain_with_rtt_and_pause(commands, modprobe, tmp_path):
    modprobe("sch_netem")
    # scaled x2 only: the guest runs under TCG, slow enough that the controller must not race 1000 packets/s
    spec = PauseChainSpec.model_validate({
        "name": "pause_chain", "scale": 2, "rtt": "100ms",
        "link_a": {"rate": "60pps"}, "link_b": {"rate": "100pps", "buffer": "10pkt"},
        "link_c": {"rate": "15pps", "buffer": "20pkt"},
        "pause": {"high": 12, "low": 8}})
    topo = spec.build(flows=4)
    bed = NetnsTestbed(topo, commands, prefix=f"ccrig-vmp{os.getpid()}")
    try:
        bed.up()
        s, d = topo.pairs[0]
        ping = bed.run(s, ["ping", "-c", "3", "-i", "0.2", bed.address(d)]).stdout
        rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", ping)]
        # the RTT is rtt / scale = 50 ms, all of it on the ACK path
        assert len(rtts) == 3 and all(r >= 50 for r in rtts), ping
        with chain_controller(spec, topo, bed, commands, events_csv=tmp_path / "events.csv") as ctl:
            server = bed.popen(d, ["iperf3", "-s", "-1", "-p", "5395"])
            try:
                time.sleep(1)
                bed.run(s, ["iperf3", "-c", bed.address(d), "-p", "5395", "-t", "6", "-P", "4", "-C", "reno"],
                        timeout=60)
            finally:
                server.kill()
                server.wait()
        stats = ctl.stats()

        def drops(node, toward):
            out = bed.run(node, ["tc", "-s", "-j", "qdisc", "show", "dev", bed.egress_device(node, toward)]).stdout
            return next(q["drops"] for q in json.loads(out) if q["handle"] == "10:")
        q1, q2 = drops("n1", "n2"), drops(*topo.bottleneck)
        print(f"xoff {stats.xoff} xon {stats.xon} paused {stats.paused_s:.2f}s max occupancy "
              f"{stats.max_occupancy} drops n1 {q1} n2 {q2} latency median "
              f"{sorted(stats.latency_s)[len(stats.latency_s) // 2] if stats.latency_s else None}")
        assert stats.xoff > 0 and stats.paused_s > 0
        assert q1 > q2
    finally:
        bed.down()
