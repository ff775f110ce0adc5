"""The ceiling of one flow (item 4): one cubic flow through the dumbbell's packet-counted bottleneck
(pfifo of 100 wire packets, about 5 bandwidth-delay products at 1 Gbit/s here), at rising rates, with wire
packets on every hop (the default) and with `topology.gso: true` (senders keep super-packets, the bottleneck's
tbf cuts them: qdiscs/shaper.py). Per cell: goodput / T_max and the fidelity monitor's verdict (a whole `ccrig
run`, tests/bench/bench_scale.py) and the queue monitor's largest occupancy in wire packets (never above the
buffer). Reports the fastest rate of each mode with goodput / T_max >= 0.97.

Beside them, plain Mininet as its users write it: a TCLink of `bw` Mbit/s between two routers, Mininet's
defaults otherwise (offloads on; no max_queue_size, which needs netem, absent from this kernel; so htb's own
leaf, txqueuelen packets deep). Its queue, polled every 10 ms from the root namespace, shows what it counts:
bytes per queued packet above one frame are super-packets.

Run as root: `make bench BENCH=ceiling` -> results/bench/ceiling.json (about 20 s per cell).
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import run_cell  # noqa: E402

DURATION_S = 10
BUFFER = 100
RATES_MBIT = [100, 300, 500, 700, 850, 1000, 1500]
GOAL = 0.97
# and the 15-packet buffer of tests/host/test_dumbbell.py at 1 Gbit/s: never more than 15 wire packets
SMALL = (1000, 15)
TCLINK_MAX_MBIT = 1000   # TCLink ignores a larger bw ("outside supported range 0..1000")


def _spec(rate_mbit: int, gso: bool, buffer: int) -> str:
    return (f"name: ceiling-{rate_mbit}-{'gso' if gso else 'wire'}\ntestbed: netns\ntopology:\n  name: dumbbell\n"
            f"  gso: {str(gso).lower()}\n  bottleneck:\n    rate: {rate_mbit}mbit\n    buffer: {buffer}pkt\n"
            f"    qdisc: pfifo\nflows:\n  - cc: cubic\nduration: {DURATION_S}s\ninterval: 1s\nwarmup: 1\n"
            f"queue_monitor: true\n")


def _occupancy_max(out: Path, cell: dict) -> int | None:
    runs = sorted(out.iterdir(), key=lambda p: p.stat().st_mtime)
    path = runs[-1] / "points" / "000" / "rep0" / "queues.csv"
    if cell.get("exit") != 0 or not path.exists():
        return None
    with open(path, newline="") as f:
        return max((int(r["occupancy_max_packets"]) for r in csv.DictReader(f)), default=None)


def _tclink(rate_mbit: int) -> dict:
    """One iperf3 flow through a plain Mininet TCLink (bw=rate_mbit): goodput / T_max and its queue's largest
    length in packets and bytes."""
    from mininet.link import TCLink
    from mininet.net import Mininet
    from mininet.node import Node
    tag = f"pc{os.getpid() % 100000}"
    Mininet.inited = True   # skip fixLimits' host-wide sysctls, as the testbed does
    net = Mininet(controller=None, autoSetMacs=False)
    s, d = net.addHost(f"{tag}s", ip="10.1.1.2/24"), net.addHost(f"{tag}d", ip="10.2.1.2/24")
    r1, r2 = net.addHost(f"{tag}r1", cls=Node, ip=None), net.addHost(f"{tag}r2", cls=Node, ip=None)
    net.addLink(s, r1, intfName1="eth0", intfName2="eth0", params2={"ip": "10.1.1.1/24"})
    net.addLink(r1, r2, cls=TCLink, bw=rate_mbit, intfName1="eth1", intfName2="eth1",
                params1={"ip": "10.9.0.1/24"}, params2={"ip": "10.9.0.2/24"})
    net.addLink(r2, d, intfName1="eth0", intfName2="eth0", params1={"ip": "10.2.1.1/24"})
    seen, stop = [], threading.Event()
    try:
        net.start()
        for h, via in ((s, "10.1.1.1"), (d, "10.2.1.1")):
            h.cmd(f"ip route add default via {via}")
        for r, net_, via in ((r1, "10.2.1.0/24", "10.9.0.2"), (r2, "10.1.1.0/24", "10.9.0.1")):
            r.cmd("sysctl -q -w net.ipv4.ip_forward=1")
            r.cmd(f"ip route add {net_} via {via}")
        server = d.popen(["iperf3", "-s", "-1", "-p", "5999"])
        time.sleep(0.5)

        def poll():
            while not stop.is_set():
                out = subprocess.run(["mnexec", "-a", str(r1.pid), "tc", "-s", "-j", "qdisc", "show", "dev", "eth1"],
                                     capture_output=True, text=True).stdout
                for q in json.loads(out or "[]"):
                    if q.get("root"):
                        seen.append((q["qlen"], q["backlog"]))
                time.sleep(0.01)
        t = threading.Thread(target=poll)
        t.start()
        client = s.popen(["iperf3", "-c", "10.2.1.2", "-p", "5999", "-t", str(DURATION_S), "-J"],
                         stdout=subprocess.PIPE)
        out, _ = client.communicate(timeout=DURATION_S + 30)
        stop.set()
        t.join()
        server.wait(10)
    finally:
        stop.set()
        net.stop()
    g = json.loads(out)["end"]["sum_received"]["bits_per_second"]
    qlen, backlog = max(q for q, _ in seen), max(b for _, b in seen)
    return {"cell": f"{rate_mbit}mbit mininet-tclink", "mode": "mininet-tclink", "rate_mbit": rate_mbit,
            "goodput_of_t_max": g / (rate_mbit * 1e6 * 1448 / 1514), "queue_max_packets": qlen,
            "queue_max_bytes": backlog, "bytes_per_queued_packet_at_most": round(backlog / max(qlen, 1)),
            "polls": len(seen)}


def run() -> dict:
    cells = []
    with tempfile.TemporaryDirectory(prefix="ccrig-bench-ceiling-") as tmp:
        out = Path(tmp) / "runs"
        grid = [(gso, rate, BUFFER) for gso in (False, True) for rate in RATES_MBIT] + [(True, *SMALL)]
        for gso, rate, buffer in grid:
            spec = Path(tmp) / f"{rate}-{gso}-{buffer}.yaml"
            spec.write_text(_spec(rate, gso, buffer))
            cell = run_cell(spec, out, f"{rate}mbit {'gso' if gso else 'wire'} {buffer}pkt", DURATION_S)
            cell.update({"mode": "gso" if gso else "wire", "rate_mbit": rate,
                         "queue_max_packets": _occupancy_max(out, cell), "buffer_packets": buffer})
            cells.append(cell)
            print(json.dumps(cell), flush=True)
        for rate in [r for r in RATES_MBIT if r <= TCLINK_MAX_MBIT]:
            cells.append(_tclink(rate))
            print(json.dumps(cells[-1]), flush=True)
    fastest = {}
    for mode in ("wire", "gso", "mininet-tclink"):   # goodput at the goal, and (ccrig) the run's verdict ok
        ok = [c["rate_mbit"] for c in cells if c["mode"] == mode and (c.get("goodput_of_t_max") or 0) >= GOAL
              and c.get("verdict", "ok") == "ok" and c.get("buffer_packets", BUFFER) == BUFFER]
        fastest[mode] = max(ok) if ok else None
    return {"cells": cells, "goal_goodput_of_t_max": GOAL, "fastest_rate_mbit_at_goal_and_ok": fastest,
            "queue_within_buffer": all(c["queue_max_packets"] is None or c["queue_max_packets"] <= c["buffer_packets"]
                                       for c in cells if c["mode"] != "mininet-tclink")}
