"""A repetition's intervals are settled from every sample once the traffic is over (measurement._settle): each
flow's bytes over its intervals in intervals.csv add up to what its socket acked over the same span in trace.csv
(the sender's complete record), and the system row is the sum of the flows'."""
import csv
import os
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from conftest import dumbbell, leftovers

from ccrig.analysis.intervals import FlowSeries
from ccrig.commands import Commands
from ccrig.experiments import spec as specmod
from ccrig.experiments.run.repetition import Lent, Unit, run


def _sampler_pids() -> list[int]:
    """This test's TCP_INFO samplers: its descendants whose command line has a sampling period (they name their
    namespaces by inode, so the run's prefix is not in it)."""
    parent = {}
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit():
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue

    def ours(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == os.getpid():
                return True
        return False
    out = []
    for pid in parent:
        try:
            if ours(pid) and b"--period" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                out.append(pid)
        except OSError:
            continue
    return out


def _hold_the_sampler(out: Path, done: threading.Event, held: list) -> None:
    """Once two intervals are in intervals.csv, the samplers stopped for 3.5 s: the live rows of the boundary
    they miss read stale counters (the live loop waits a second for a late sampler, then reads what it has), as
    a sampler the machine starved would."""
    while not done.is_set():
        table = out / "intervals.csv"
        if table.is_file() and table.read_text().count("\n") >= 1 + 2 * 4:   # header, 2 x (3 flows + all)
            break
        time.sleep(0.05)
    pids = _sampler_pids()
    held.extend(pids)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    done.wait(3.5)
    for pid in pids:
        os.kill(pid, signal.SIGCONT)


def test_every_flows_intervals_add_up_to_what_its_socket_acked(tmp_path):
    path = tmp_path / "settle.yaml"
    path.write_text(yaml.safe_dump(dumbbell([{"cc": "reno"}, {"cc": "cubic"}, {"cc": "reno"}], duration="10s",
                                            rate="10mbit", buffer="20pkt")))
    raw, exp = specmod.load(path)
    point = specmod.points(raw, exp, str(path))[0]
    unit = Unit(point=point, rep=0, out=tmp_path / "settle", prefix=f"ccrig-{os.getpid()}-settle",
                laws={i: f.cc_label for i, f in enumerate(exp.flow_list())}, experiment="settle",
                run_id="settle-test")
    done = threading.Event()
    held: list[int] = []
    holder = threading.Thread(target=_hold_the_sampler, args=(unit.out, done, held))
    holder.start()
    try:
        entry = run(unit, Lent(Commands(tmp_path / "settle.commands.log")))
    finally:
        done.set()
        holder.join()
    assert held, "no sampler of the run was found to hold"
    # the live rows of the boundary the samplers missed were stale: settling moved them
    settled = entry["settled"]
    assert settled["intervals_moved"] >= 1 and settled["largest_goodput_change"] > 0.01, settled
    rows = list(csv.DictReader(open(unit.out / "intervals.csv")))
    acked, end = defaultdict(float), 0.0
    system = defaultdict(float)
    for r in rows:
        dt = float(r["t_end"]) - float(r["t_start"])
        end = max(end, float(r["t_end"]))
        if r["flow"] == "all":
            system[r["interval"]] += float(r["goodput_bps"])
        else:
            acked[r["flow"]] += float(r["goodput_bps"]) * dt / 8
            system[r["interval"]] -= float(r["goodput_bps"])
    trace = defaultdict(list)
    for r in csv.DictReader(open(unit.out / "trace.csv")):
        trace[r["flow"]].append((float(r["t"]), {"bytes_acked": float(r["bytes_acked"])}))
    assert sorted(acked) == sorted(trace) == ["0", "1", "2"]
    for flow, samples in trace.items():
        whole = FlowSeries(samples).delta("bytes_acked", 0.0, end)
        # intervals.csv keeps six significant digits of each rate
        assert whole > 100_000 and acked[flow] == pytest.approx(whole, rel=1e-4), flow
    assert all(abs(v) < 1e-3 * 10e6 for v in system.values())
    assert leftovers(os.getpid()) == []
