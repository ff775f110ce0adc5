"""The sample log and its OpenMetrics rendering (the host test feeds it to a real promtool and Prometheus)."""
from __future__ import annotations

from ccrig.experiments.telemetry.backfill import SampleLog, openmetrics, read_samples
from ccrig.samples import Sample

FLOW = {"experiment": "e", "run": "r1", "point": "0", "rep": "0", "flow": "0", "cc": "reno"}


def test_log_round_trip_stamps_info_and_survives_a_cut_line(tmp_path):
    log = SampleLog(tmp_path / "samples.jsonl")
    log.set_info([Sample("run_info", {"run": "r1", "testbed": "vm"}, 1.0)])
    log.publish([Sample("flow_goodput_bytes_per_second", FLOW, 5e6, 100.0)])
    log.publish([Sample("flow_goodput_bytes_per_second", FLOW, 6e6, 101.0),
                 Sample("flow_rtt_seconds", FLOW, 0.02, None)])  # unstamped samples cannot be backfilled
    log.close()
    with open(tmp_path / "samples.jsonl", "a") as f:
        f.write('{"name": "flow_goodput_bytes_per_second", "labels": {"run"')  # a killed run's last line
    got = read_samples(tmp_path / "samples.jsonl")
    assert [(s.name, s.value, s.ts) for s in got] == [
        ("flow_goodput_bytes_per_second", 5e6, 100.0), ("run_info", 1.0, 100.0),
        ("flow_goodput_bytes_per_second", 6e6, 101.0), ("run_info", 1.0, 101.0)]


def test_openmetrics_groups_families_orders_time_and_names_counters():
    samples = [Sample("flow_goodput_bytes_per_second", FLOW, 6e6, 101.0),
               Sample("qdisc_sent_packets", {"run": "r1", "node": "r", "dev": "eth1"}, 10.0, 100.0),
               Sample("flow_goodput_bytes_per_second", FLOW, 5e6, 100.0),
               Sample("flow_goodput_bytes_per_second", FLOW, 5.5e6, 100.0)]  # same time: the later one wins
    text = openmetrics(samples).decode()
    lines = [l for l in text.splitlines() if not l.startswith("#")]
    assert lines[0].startswith("ccrig_flow_goodput_bytes_per_second{") and lines[0].endswith(" 5.5e+06 100.0")
    assert lines[1].endswith(" 6e+06 101.0")
    assert lines[2].startswith("ccrig_qdisc_sent_packets_total{")
    assert "# TYPE ccrig_qdisc_sent_packets counter" in text
    assert text.rstrip().endswith("# EOF")
