"""Benchmark: the emulated PAUSE controller's reaction latency (goal: median below 1 ms).

A real pause_chain of namespaces (the study's B1 = 10, B2 = 20, μ1 = 100, ν = 15 packets/s, scaled x10, link A
at 60 packets/s so node 2's queue crosses the thresholds all the time), four Reno flows for a few seconds,
T1 = 12, T2 = 8, μ2 = 0. Latency = kernel ack of the rate change - the previous poll that still saw the
other side of the threshold (an upper bound on crossing -> change in force); actuate = the change alone.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from ccrig.commands import Commands
from ccrig.topologies.testbeds.netns import NetnsTestbed
from ccrig.topologies.pause import chain_controller
from ccrig.topologies.named.pause_chain import PauseChainSpec

SECONDS = 6
GOAL_MEDIAN_S = 1e-3


def _quantiles(xs: list[float]) -> dict:
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    pick = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    return {"n": len(xs), "median_s": statistics.median(xs), "p90_s": pick(0.9), "p99_s": pick(0.99),
            "max_s": xs[-1], "mean_s": statistics.fmean(xs)}


def run() -> dict:
    spec = PauseChainSpec.model_validate({
        "name": "pause_chain", "scale": 10,
        "link_a": {"rate": "60pps"}, "link_b": {"rate": "100pps", "buffer": "10pkt"},
        "link_c": {"rate": "15pps", "buffer": "20pkt"},
        "pause": {"high": 12, "low": 8, "paused_rate": 0}})
    topo = spec.build(flows=4)
    tmp = Path(tempfile.mkdtemp(prefix="ccrig-bench-pause-"))
    bed = NetnsTestbed(topo, Commands(tmp / "commands.log"), prefix=f"ccrig-{os.getpid()}")
    try:
        bed.up()
        s, d = topo.pairs[0]
        ctl = chain_controller(spec, topo, bed, bed.commands, events_csv=tmp / "events.csv")
        ctl.start()
        server = bed.popen(d, ["iperf3", "-s", "-1", "-p", "5398"])
        try:
            time.sleep(0.5)
            bed.run(s, ["iperf3", "-c", bed.address(d), "-p", "5398", "-t", str(SECONDS), "-P", "4", "-C", "reno"],
                    timeout=SECONDS + 30)
        finally:
            server.kill()
            server.wait()
            stats = ctl.stop()
    finally:
        bed.down()
    latency = _quantiles(stats.latency_s)
    return {
        "what": "emulated PAUSE controller: threshold crossing -> rate change in force (upper bound)",
        "goal_median_s": GOAL_MEDIAN_S,
        "met": latency.get("median_s", float("inf")) < GOAL_MEDIAN_S,
        "latency": latency,
        "actuate": _quantiles(stats.actuate_s),
        "xoff": stats.xoff, "xon": stats.xon, "paused_s": stats.paused_s,
        "polls_per_s": stats.polls / stats.elapsed_s if stats.elapsed_s else 0.0,
        "max_occupancy": stats.max_occupancy,
        "setup": spec.scaling(),
    }


if __name__ == "__main__":
    import json
    print(json.dumps(run(), indent=2))
