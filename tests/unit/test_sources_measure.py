"""How the traffic sources are measured: the program's schedules, its receiver's line format, what
the kinds make of a receiver's log (summary.json, interval rows, the cross-check of the sender's count against
the receiver's), and the runner's follower of such a log (collectors.ReceiverLog)."""
import json
import random
import statistics
import subprocess
import sys
import time

import pytest

from ccrig.analysis.intervals import FlowSeries
from ccrig.experiments.run.collectors import ReceiverLog
from ccrig.experiments.workloads import Flow, packets
from ccrig.experiments.nodes import sources
from ccrig.experiments.workloads.cbr import Cbr
from ccrig.experiments.workloads.interactive import Interactive
from ccrig.experiments.workloads.onoff import OnOff


def test_schedules():
    assert list(sources.cbr_times(4, 1.0)) == [0, 0.25, 0.5, 0.75]
    t = list(sources.poisson_times(1000, 20.0, random.Random(1)))
    gaps = [b - a for a, b in zip(t, t[1:])]
    assert abs(len(t) / 20000 - 1) < 0.03 and abs(statistics.pstdev(gaps) / statistics.fmean(gaps) - 1) < 0.03
    periods = []
    t = list(sources.onoff_times(10, 1.0, 2.0, False, 7.0, random.Random(1), periods))
    assert periods == [[0.0, 1.0], [3.0, 4.0], [6.0, 7.0]]
    assert len(t) == 30 and t[:2] == [0.0, 0.1] and t[10] == 3.0


def test_receiver_lines_are_the_samplers_format_with_the_packets():
    c = sources.Counts("5201:40001")
    c.add(0, 10.0, 10.001, 100, 100)
    c.add(2, 10.2, 10.201, 100, 300)   # packet 1 lost
    rec = json.loads(c.line())
    assert rec["s"]["5201:40001"] == {"bytes_acked": 200, "bytes_received": 200, "bytes_sent": 300,
                                      "data_segs_out": 3, "data_segs_in": 2}
    assert rec["p"] == [[0, 10.0, 10.001, 100], [2, 10.2, 10.201, 100]]
    assert json.loads(c.line())["p"] == []   # each packet once


def _udp_files(tmp_path, flow, n=100, lost=(), gap=0.01):
    """A receiver's log of n packets (minus lost) 1 ms in flight, `gap` apart, and the sender's closing line."""
    c = sources.Counts(flow.receiver_key)
    lines = []
    for i in range(n):
        if i not in lost:
            c.add(i, 100 + i * gap, 100 + i * gap + 0.001 * (1 + i % 2), 200, 200 * (i + 1))
        if i % 10 == 9:
            lines.append(c.line())
    (tmp_path / flow.workload.server_output.format(index=flow.index)).write_text("\n".join(lines) + "\n{\"t\"")
    (tmp_path / flow.output_name).write_text(json.dumps({"sent": n, "bytes": 200 * n, "errors": 0, "t_start": 100,
                                                         "t_end": 100 + n * gap, "on": []}) + "\n")


def test_a_udp_flow_summary_counts_both_ends(tmp_path):
    f = Flow(Cbr(rate="100pps", size="200b"), 0, "cubic", "cubic", "s1", "d1", start=0.0, duration=1.0)
    _udp_files(tmp_path, f, lost=(5, 6))
    result = f.workload.result(f, tmp_path)          # the half-written last line is left out
    assert f.workload.received_bytes(f, result) == 98 * 200
    e = Cbr.summary([f], {0: result})["cbr"][0]
    assert (e["sender_packets"], e["receiver_packets"], e["receiver_numbered"]) == (100, 98, 100)
    assert e["sender_vs_receiver"] == 0 and e["loss"] == pytest.approx(0.02)
    assert e["one_way_delay_s"]["min"] == pytest.approx(0.001) and e["one_way_delay_s"]["max"] == pytest.approx(0.002)
    assert e["jitter_s"] == pytest.approx(0.001)
    assert e["delivered_pps"] == pytest.approx(97 / 0.991)   # first receipt 100.001, last 100.992
    assert e["delivered_wire_bps"] == pytest.approx(8 * 97 * 242 / 0.991)


def test_a_sender_that_failed_says_so(tmp_path):
    f = Flow(Cbr(rate="100pps"), 1, "cubic", "cubic", "s2", "d2", start=0.0, duration=1.0)
    (tmp_path / f.output_name).write_text("sources: 198.18.0.4:5202: [Errno 101] Network is unreachable\n")
    (tmp_path / "receiver-1.jsonl").write_text("")
    with pytest.raises(Exception, match="cbr sender of flow 1 .*Network is unreachable"):
        f.workload.result(f, tmp_path)


def test_udp_interval_rows_are_delivered_and_offered_with_loss_and_no_retransmissions():
    w = Cbr(rate="100pps", size="200b")
    samples = [(0.0, {"bytes_acked": 0, "bytes_sent": 0, "data_segs_out": 0, "data_segs_in": 0}),
               (1.0, {"bytes_acked": 18000, "bytes_sent": 20000, "data_segs_out": 100, "data_segs_in": 90})]
    row = w.interval(FlowSeries(samples), 0.0, 1.0, 1e6)
    assert row["goodput_bps"] == 144000 and row["throughput_bps"] == 160000
    assert row["loss"] == pytest.approx(0.1) and row["retrans_rate"] == 0
    assert row["rtt_s"] is None and row["cwnd"] is None and row["segs_sent"] == 100


def test_onoff_periods_from_the_receivers_packets(tmp_path):
    w = OnOff(rate="100pps", size="200b", on="1s", off="1s")
    f = Flow(w, 0, "cubic", "cubic", "s1", "d1", start=0.0, duration=4.0)
    c = sources.Counts(f.receiver_key)
    seq = 0
    for start in (0.0, 2.0):
        for k in range(100):
            c.add(seq, 100 + start + k / 100, 100 + start + k / 100 + 0.001, 200, 200 * (seq + 1))
            seq += 1
    (tmp_path / "receiver-0.jsonl").write_text(c.line() + "\n")
    (tmp_path / "sender-0.json").write_text(json.dumps({"sent": 200, "bytes": 40000, "errors": 0, "t_start": 100,
                                                        "t_end": 104, "on": [[100, 101], [102, 103]]}))
    p = OnOff.summary([f], {0: w.result(f, tmp_path)})["onoff"][0]["periods"]
    assert p["on_s"] == pytest.approx([0.99, 0.99]) and p["off_s"] == pytest.approx([1.01])
    assert p["scheduled_on_s"] == [1, 1] and p["scheduled_off_s"] == [1]


def test_interactive_latency_from_the_receivers_log(tmp_path):
    w = Interactive(think="100ms")
    f = Flow(w, 0, "cubic", "cubic", "s1", "d1", start=0.0, duration=1.0)
    c = sources.Counts(f.receiver_key)
    for i in range(10):
        c.add(i, 100 + i / 10, 100 + i / 10 + 0.001 * (i + 1), 40)
    (tmp_path / "receiver-0.jsonl").write_text(c.line() + "\n")
    (tmp_path / "sender-0.json").write_text(json.dumps({"sent": 10, "bytes": 400, "errors": 0, "t_start": 100,
                                                        "t_end": 101, "on": []}))
    e = Interactive.summary([f], {0: w.result(f, tmp_path)})["interactive"][0]
    assert e["receiver_messages"] == e["sender_messages"] == 10 and e["sender_vs_receiver"] == 0
    assert e["latency_s"]["p50"] == pytest.approx(0.0055) and e["latency_s"]["max"] == pytest.approx(0.010)
    assert e["goodput_bps"] == pytest.approx(3200)


def test_percentiles_and_bursts():
    assert packets.percentile([3, 1, 2], 50) == 2 and packets.percentile([], 50) is None
    assert packets.percentile(list(range(101)), 99) == 99
    pk = [packets.Packet(i, t, t, 1) for i, t in enumerate([0, 0.1, 0.2, 1.0, 1.1, 3.0])]
    assert packets.bursts(pk, 0.5) == [(0, 0.2), (1.0, 1.1), (3.0, 3.0)]


class _Testbed:
    def clock_offset(self, node):
        return 0.5   # the receiver's clock runs half a second ahead of ours


def test_receiver_log_follows_the_file_under_both_keys(tmp_path):
    path = tmp_path / "receiver-0.jsonl"
    path.write_text("")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    log = ReceiverLog(_Testbed(), "d1", "5201:40001", ["40001:5201", "5201:40001"], path, proc, 0.02, t0=100.0)
    try:
        with open(path, "a") as fh:
            fh.write(json.dumps({"t": 101.5, "s": {"5201:40001": {"bytes_acked": 7}}, "p": []}) + "\n")
            fh.write('{"t": 102.5, "s": {"5201:40001": {"bytes_')   # still being written
            fh.flush()
            log.wait_ready(5)
            time.sleep(0.1)
            assert log.snapshot("40001:5201") == log.snapshot("5201:40001") == [(1.0, {"bytes_acked": 7})]
            fh.write('acked": 9}}, "p": []}\n')
        deadline = time.time() + 5
        while len(log.snapshot("40001:5201")) < 2 and time.time() < deadline:
            time.sleep(0.02)
        assert log.latest_time() == 2.0 and log.error() == ""
    finally:
        log.stop()
        proc.kill()
        proc.wait()
    assert "the receiver ended" in log.error()
