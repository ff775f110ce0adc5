"""Looking inside a run, on this kernel: the packet capture against TCP_INFO, its size cap, the queue monitor
against the queue's own limit and Little's law, and the report's time-sequence graph against the capture."""
import csv
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ccrig.analysis import pcap
from ccrig.experiments.workloads.base import CLIENT_PORT
from ccrig.qdiscs import sojourn
from conftest import CCRIG, ROOT, dumbbell

RATE = 10e6
TX = 1514 * 8 / RATE   # one full-size frame's transmission time at the bottleneck (s)


def _rep(run_dir: Path) -> Path:
    return run_dir / "points" / "000" / "rep0"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """10 s through a 10 Mbit/s pfifo of 15 packets, captured at the receiver and the queue watched."""
    tmp = tmp_path_factory.mktemp("inside")
    spec = dumbbell([{"cc": "reno"}, {"cc": "cubic"}], duration="10s", buffer="15pkt", queue_monitor=True,
                    capture={"links": ["d1-r2", "bottleneck"], "snaplen": 96, "max_mb": 100})
    spec["name"] = "inside"
    (tmp / "spec.yaml").write_text(json.dumps(spec))
    p = subprocess.run([*CCRIG, "run", str(tmp / "spec.yaml"), "--out", str(tmp / "runs"), "--prometheus", "off",
                        "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    return next((tmp / "runs").iterdir())


def test_the_capture_holds_every_data_segment_tcp_info_counts(run):
    rep = json.loads((_rep(run) / "repetition.json").read_text())
    cap = rep["capture"]
    assert cap["capped"] is False and all(l["dropped_by_capture"] == 0 for l in cap["links"]), cap
    flow0 = next(f for f in cap["flows"] if f["flow"] == 0)
    # the receiver's link: what arrived at d1, counted independently of TCP (the pcap's own records)
    seen = pcap.data_packets(_rep(run) / "capture-d1-r2.pcap", dport=5201, sport=CLIENT_PORT)
    assert sum(seen.values()) == flow0["data_packets"]["d1-r2"]
    assert flow0["receiver_data_segs_in"] > 3000
    assert abs(flow0["data_packets"]["d1-r2"] - flow0["receiver_data_segs_in"]) <= 0.01 * flow0["receiver_data_segs_in"]
    # the bottleneck's egress carries both flows' data
    assert all(f["data_packets"]["bottleneck"] >= f["receiver_data_segs_in"] * 0.99 for f in cap["flows"])


def test_the_queue_never_holds_more_than_its_limit_and_littles_law_holds(run):
    with open(_rep(run) / "queues.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["interval"]) >= 1]   # the first is the warm-up
    assert len(rows) >= 8 and {(r["node"], r["dev"]) for r in rows} == {("r1", "eth0")}
    for r in rows:
        assert int(r["occupancy_max_packets"]) <= 15, r
        length = float(r["t_end"]) - float(r["t_start"])
        arrivals = int(r["dequeued"]) / length
        little = arrivals * float(r["sojourn_mean_s"])
        assert abs(float(r["occupancy_mean_packets"]) - little) <= 0.1 * little, r
    # the raw events say the same: never above 15, and there are per-packet sojourns
    summary = json.loads((_rep(run) / "repetition.json").read_text())["queue_monitor"]
    assert summary["lost_events"] == 0 and summary["method"].startswith("bpf")
    [events] = sojourn.read_events(_rep(run), summary).values()
    assert events.qlen.max() <= 15 and (events.kind == 1).sum() > 5000
    # a packet waits for at most the 15 ahead of it, one frame time each (its own is after the dequeue), plus the
    # longest the shaper stalled with packets queued, read from the dequeues' own times (a machine whose hypervisor
    # takes its CPU for milliseconds stalls every timer: 25.1 ms against 18.2 on a host with steal bursts); the
    # margin is for a dequeue timer late on a busy machine
    late = events.t >= summary["t0_epoch_s"] + 1
    measured = events.sojourn_ns[(events.kind == 1) & late] / 1e9
    p99 = sorted(measured)[int(0.99 * len(measured))]
    deq = events[(events.kind == 1) & late]
    gaps = np.diff(deq.t)[deq.qlen[:-1] > 0]   # between two dequeues with the queue still holding packets
    stall = max(0.0, float(gaps.max()) - TX) if len(gaps) else 0.0
    print(f"sojourn p99 {p99 * 1e3:.2f} ms, 15 frame times {15 * TX * 1e3:.2f} ms, longest stall {stall * 1e3:.2f} ms")
    assert p99 <= 15 * TX + stall + 0.003, (p99, stall)
    # the bottleneck's columns in intervals.csv, and the series in the sample log the exporter serves
    with open(_rep(run) / "intervals.csv", newline="") as f:
        system = [r for r in csv.DictReader(f) if r["flow"] == "all"]
    assert all(r["queue_sojourn_p99_s"] and r["queue_occupancy_max_packets"] for r in system)
    names = {json.loads(line)["name"] for line in (run / "samples.jsonl").read_text().splitlines()}
    assert {"queue_sojourn_p99_seconds", "queue_occupancy_mean_packets"} <= names


def test_the_report_draws_the_time_sequence_graph_from_the_capture(run):
    p = subprocess.run([*CCRIG, "report", str(run)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = run / "report"
    [ts] = [t for t in pcap.time_sequences(_rep(run) / "capture-d1-r2.pcap") if t.flow[1] == CLIENT_PORT]
    assert ts.retransmits, "a 15-packet buffer must have made the flow retransmit"
    png = report / "timeseq_p000_d1-r2_0.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(report / "timeseq_p000_d1-r2_0.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    drawn = sorted((round(float(r["t"]), 6), int(r["start"])) for r in rows if r["kind"] == "retransmit")
    assert drawn == sorted((round(t, 6), a) for t, a, _ in ts.retransmits)
    assert (report / "sojourn_cdf.png").is_file()
    assert "Time-sequence graphs" in (report / "report.md").read_text()


def test_the_size_cap_stops_the_capture_and_the_archive_says_so(ccrig):
    p = ccrig.run(dumbbell([{"cc": "cubic"}], duration="6s", capture={"links": ["bottleneck"], "max_mb": 0.2}),
                  timeout=180)
    assert p.returncode == 0, p.stderr
    run = ccrig.run_dirs()[-1]
    cap = json.loads((_rep(run) / "repetition.json").read_text())["capture"]
    assert cap["capped"] is True and cap["capped_after_s"] < 5, cap
    size = (_rep(run) / "capture-bottleneck.pcap").stat().st_size
    # stopped within the watcher's period (50 ms): at 10 Mbit/s and 144-byte records about 6 kB past the cap
    assert 0.2e6 <= size <= 0.22e6, size
    assert size == cap["links"][0]["bytes"] and "max_mb" in cap["note"]
    assert any("max_mb" in w for w in json.loads((run / "summary.json").read_text())["points"][0].get(
        "warnings", [])) or "max_mb" in p.stdout + p.stderr
