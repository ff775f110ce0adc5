"""The queue monitor's cost (qdiscs/sojourn): at 100 Mbit/s through an htb + pfifo bottleneck, for SECONDS, the CPU
the monitor takes — its loader process (user + system, from /proc), the BPF programs in the kernel (bpf_stats:
run_time_ns of the two tracepoint programs) and the Python that summarises each interval — as a share of one
core, and per 100k packets/s through the watched qdisc.

Goal: below 10 % of a core at 100 Mbit/s. Run as root: `make bench BENCH=queue_monitor`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ccrig.commands import Commands  # noqa: E402
from ccrig.qdiscs import sojourn  # noqa: E402
from support.dumbbell import Dumbbell  # noqa: E402

SECONDS = 10
GOAL_CORE = 0.10
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _bpf_ns() -> int:
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    return sum(p.get("run_time_ns", 0) for p in json.loads(out or "[]")
               if p.get("name") in ("on_enqueue", "on_dequeue"))


def measure(rate: str) -> dict:
    with Dumbbell(f"qm{rate}", rate=rate, buffer="100pkt", pairs=2) as d:
        ns, ifindex = d.tb.run("r1", ["sh", "-c", f"stat -L -c %i /proc/self/ns/net; "
                                                  f"cat /sys/class/net/{d.dev}/ifindex"]).stdout.split()
        out = Path(f"/tmp/bench-qm-{os.getpid()}")
        mon = sojourn.QueueMonitor(Commands(), [sojourn.Watched("r1", d.dev, int(ns), int(ifindex))], out)
        stats_before = Path("/proc/sys/kernel/bpf_stats_enabled").read_text().strip()
        Path("/proc/sys/kernel/bpf_stats_enabled").write_text("1")
        try:
            mon.start()
            flows = [d.start(i, SECONDS, 5301 + i) for i in range(2)]
            cpu0, bpf0, t0, py = _cpu_s(mon.proc.pid), _bpf_ns(), time.time(), 0.0
            packets = 0
            for k in range(1, SECONDS + 1):
                time.sleep(max(0.0, t0 + k - time.time()))
                c = time.process_time()
                per = mon.interval(t0 + k - 1, t0 + k)
                py += time.process_time() - c
                packets += next(iter(per.values()))["dequeued"]
            wall = time.time() - t0
            cpu, bpf = _cpu_s(mon.proc.pid) - cpu0, (_bpf_ns() - bpf0) / 1e9
            for f in flows:
                d.result(f, timeout=SECONDS + 30)
        finally:
            mon.stop()
            Path("/proc/sys/kernel/bpf_stats_enabled").write_text(stats_before)
            for p in out.glob("*"):
                p.unlink()
            out.rmdir()
    pps = packets / wall
    total = (cpu + bpf + py) / wall
    return {"rate": rate, "seconds": round(wall, 2), "packets_per_s": round(pps),
            "loader_core": round(cpu / wall, 4), "bpf_core": round(bpf / wall, 4),
            "python_core": round(py / wall, 4), "total_core": round(total, 4),
            "core_per_100k_pps": round(total / pps * 1e5, 4) if pps else None}


def run() -> dict:
    cells = [measure("100mbit"), measure("400mbit")]
    at100 = cells[0]
    return {"goal": f"monitor below {GOAL_CORE:.0%} of a core at 100 Mbit/s", "cells": cells,
            "met": at100["total_core"] < GOAL_CORE,
            "note": "loader: the libbpf program streaming events; bpf: the tracepoint programs' run time "
                    "(kernel.bpf_stats_enabled); python: the per-interval summaries"}


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
