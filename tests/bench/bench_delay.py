"""Throughput through the delay line: one cubic flow across the dumbbell at 100 ms RTT, the delay made by
delay lines (`delay: {via: line}`, topologies/delayline), at 100, 300 and 1000 Mbit/s, with wire packets on every
hop and with `topology.gso: true` (the ceiling modes of bench_ceiling.py). The bottleneck's pfifo holds one
bandwidth-delay product, so a lone loss-based flow can keep the link busy through its sawtooth, and the flow's socket
buffers may grow to four (`tcp.buffer`: Linux's own maxima would cap it near 300 Mbit/s at this RTT).

Each cell runs twice, first without added delay (no line: what this shared machine carries at that moment), then
through the lines; `of_plain_path` is the second's goodput over the first's. Per cell: goodput / T_max and the fidelity verdict of a whole `ccrig run` (which now includes the delay each flow
and each line had), the flow's min RTT, the lines' lateness and lost frames, and their CPU: the processes' own
CPU seconds (getrusage, which here includes the softirq work the kernel charges them for delivering the frames) per
second of the run and per Mbit/s of the link. Goal: goodput / T_max >= 0.97 at 1 Gbit/s where the plain path reaches
it (with gso: results/bench/ceiling.json).

Mahimahi's delay shell, for comparison (as its users report it): a 720 Mbit/s link with 80 ms delay gave about
300 Mbit/s, and 1 Gbit/s with 40 ms swung between 1 and 193 Mbit/s.

Run as root: `make bench BENCH=delay` -> results/bench/delay.json (about a minute per cell).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import CCRIG, ROOT, run_cell  # noqa: E402,F401

DURATION_S = 20
RTT_MS = 100
RATES_MBIT = [100, 300, 1000]
GOAL = 0.97
WIRE = 1514


def _bdp_packets(rate_mbit: int) -> int:
    return int(rate_mbit * 1e6 * RTT_MS * 1e-3 / (8 * WIRE)) + 1


def _spec(rate_mbit: int, gso: bool, rtt_ms: int = RTT_MS) -> str:
    return (f"name: delay-{rate_mbit}-{'gso' if gso else 'wire'}-{rtt_ms}\ntestbed: netns\ndelay: {{via: line}}\n"
            f"topology:\n  name: dumbbell\n  gso: {str(gso).lower()}\n  rtt: {rtt_ms}ms\n  bottleneck:\n"
            f"    rate: {rate_mbit}mbit\n    buffer: {_bdp_packets(rate_mbit)}pkt\n    qdisc: pfifo\n"
            f"flows:\n  - {{cc: cubic, tcp: {{buffer: {4 * _bdp_packets(rate_mbit) * WIRE}b}}}}\nduration: {DURATION_S}s\ninterval: 1s\nwarmup: 3\n")


def _lines(out: Path, cell: dict) -> dict:
    """The repetition's delay section of its fidelity verdict: min RTT and each line's figures."""
    if cell.get("exit") != 0:
        return {}
    runs = sorted(out.iterdir(), key=lambda p: p.stat().st_mtime)
    rep = json.loads((runs[-1] / "summary.json").read_text())["points"][0]["repetitions"][0]
    delay = rep["fidelity"].get("delay", {})
    lines = delay.get("lines", {})
    cpu = sum(d.get("cpu_s", 0.0) for d in lines.values())
    flows = delay.get("flows", [])
    return {"min_rtt_ms": flows[0]["min_rtt_s"] * 1e3 if flows else None,
            "line_late_p50_us": {k: round((d.get("late_p50_s") or 0) * 1e6, 1) for k, d in lines.items()},
            "line_late_p99_us": {k: round((d.get("late_p99_s") or 0) * 1e6, 1) for k, d in lines.items()},
            "line_lost": sum(d.get("lost", 0) for d in lines.values()),
            "line_packets": {k: d.get("packets") for k, d in lines.items()},
            "line_cpu_s": round(cpu, 3)}


def run() -> dict:
    cells = []
    with tempfile.TemporaryDirectory(prefix="ccrig-bench-delay-") as tmp:
        out = Path(tmp) / "runs"
        for gso in (False, True):
            for rate in RATES_MBIT:
                # the same run without added delay (no line) just before: what this machine carries right now
                for rtt in (0, RTT_MS):
                    spec = Path(tmp) / f"{rate}-{gso}-{rtt}.yaml"
                    spec.write_text(_spec(rate, gso, rtt))
                    cell = run_cell(spec, out, f"{rate}mbit {'gso' if gso else 'wire'} rtt {rtt}ms", DURATION_S)
                    cell.update({"mode": "gso" if gso else "wire", "rate_mbit": rate, "rtt_ms": rtt,
                                 "buffer_packets": _bdp_packets(rate), **_lines(out, cell)})
                    if rtt and cell.get("line_cpu_s") is not None:
                        # the lines live from set-up to teardown: their CPU over the run's duration is an upper bound
                        cores = cell["line_cpu_s"] / DURATION_S
                        cell.update(line_cpu_cores=round(cores, 4), line_cpu_cores_per_mbit=cores / rate)
                    cells.append(cell)
                    print(json.dumps(cell), flush=True)
    lined = [c for c in cells if c["rtt_ms"]]
    for c in lined:   # the line's goodput against the plain path's at the same rate and mode, just before it
        plain = next(p for p in cells if not p["rtt_ms"] and p["mode"] == c["mode"] and p["rate_mbit"] == c["rate_mbit"])
        if c.get("goodput_of_t_max") and plain.get("goodput_of_t_max"):
            c["of_plain_path"] = c["goodput_of_t_max"] / plain["goodput_of_t_max"]
    best = {m: max([c["rate_mbit"] for c in lined if c["mode"] == m and (c.get("goodput_of_t_max") or 0) >= GOAL
                    and c.get("verdict") == "ok"], default=None) for m in ("wire", "gso")}
    return {"rtt_ms": RTT_MS, "duration_s": DURATION_S, "cells": cells, "goal_goodput_of_t_max": GOAL,
            "fastest_rate_mbit_at_goal_and_ok": best, "load_average_after": os.getloadavg(),
            "mahimahi_reported": {"720mbit_80ms_mbit": 300, "1gbit_40ms_mbit": [1, 193]}}
