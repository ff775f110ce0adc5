"""topology.gso on this kernel: the sender hands its link super-packets, the bottleneck's tbf cuts them, and the
15-packet queue holds 15 wire packets, never more: seen in the packet capture on both links (the IP lengths, not
our settings) and in the queue monitor's events (the kernel's own qlen at each enqueue and dequeue)."""
import csv
import json
import subprocess

from ccrig.analysis import pcap
from ccrig.experiments.workloads.base import CLIENT_PORT
from ccrig.qdiscs import sojourn
from conftest import CCRIG, ROOT, dumbbell

MSS = 1448   # 1500 - 20 (IP) - 32 (TCP with timestamps)


def test_super_packets_leave_the_sender_and_the_bottleneck_queues_wire_packets(tmp_path):
    spec = dumbbell([{"cc": "cubic"}], duration="6s", rate="200mbit", buffer="15pkt", queue_monitor=True,
                    capture={"links": ["s1-r1", "bottleneck"], "snaplen": 96, "max_mb": 400})
    spec["topology"]["gso"] = True
    (tmp_path / "spec.yaml").write_text(json.dumps(spec))
    p = subprocess.run([*CCRIG, "run", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "runs"),
                        "--prometheus", "off", "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    rep = next((tmp_path / "runs").iterdir()) / "points" / "000" / "rep0"

    def data(name):
        return [s.payload for s in pcap.tcp_segments(rep / name) if s.sport == CLIENT_PORT and s.payload]

    sent, queued = data("capture-s1-r1.pcap"), data("capture-bottleneck.pcap")
    # the sender's link carries super-packets: most of the bytes go in segments of several MSS
    assert sum(x for x in sent if x > 2 * MSS) > 0.5 * sum(sent), sorted(sent)[-5:]
    # the bottleneck sends wire packets only
    assert max(queued) <= MSS and len(queued) > 2000

    summary = json.loads((rep / "repetition.json").read_text())["queue_monitor"]
    assert summary["lost_events"] == 0
    [events] = sojourn.read_events(rep, summary).values()
    # the kernel's qlen of the discipline at each event: never above 15 wire packets, and it filled up
    assert events.qlen.max() == 15
    # every packet the discipline let go is one the capture saw leave; the pieces tbf cut have no enqueue event
    # of their own (kind 2), so their sojourn is not known and the summary counts only the others
    dequeued = int((events.kind != 0).sum())
    assert abs(dequeued - len(queued)) <= 0.02 * dequeued, (dequeued, len(queued))
    assert 0 < summary["sojourns"] <= int((events.kind == 1).sum()) < 0.5 * dequeued   # the intervals' ones
    with open(rep / "queues.csv", newline="") as f:
        assert all(int(r["occupancy_max_packets"]) <= 15 for r in csv.DictReader(f))
