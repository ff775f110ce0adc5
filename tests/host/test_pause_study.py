"""The PAUSE study through `ccrig run` (this kernel, netns, rates scaled x10): a pause_chain with the emulated
XOFF/XON controller and finite-file flows, each point run with PAUSE and without it (T1 = T2 = B2).

With PAUSE (T1 < B2) node 2's queue stops overflowing and node 1's takes the backlog; without it nothing is
paused and node 2 drops. XOFF/XON counts and the time paused are in summary.json and in Prometheus, the
reaction latencies in the archive, and the summary has the goodput gain with its confidence interval.
"""
import csv
import json

import numpy

from conftest import leftovers


def chain(**extra) -> dict:
    # the study's chain (B1 = 10, B2 = 20, μ1 = 100, ν = 15 packets/s) with link A (λ1 = 60) well above ν, so
    # node 2's queue overflows unless PAUSE holds the backlog in node 1's
    spec = {"name": "pausetest", "testbed": "netns",
            "topology": {"name": "pause_chain", "scale": 10, "mtu": 1512,
                         "link_a": {"rate": "60pps"}, "link_b": {"rate": "100pps", "buffer": "10pkt"},
                         "link_c": {"rate": "15pps", "buffer": "20pkt"},
                         "pause": {"mode": "emulated", "high": 15, "low": 12, "paused_rate": 0}},
            "flows": [{"count": 4, "cc": "reno", "workload": {"kind": "files", "size": "80kb", "idle": "100ms"}}],
            "duration": "6s", "interval": "1s", "warmup": 1, "pause_gain": True}
    spec.update(extra)
    return spec


def test_pause_point_and_its_baseline(ccrig_prom, prometheus):
    from ccrig.experiments.telemetry.prometheus_server import query
    p = ccrig_prom.run(chain())
    assert p.returncode == 0, p.stderr
    run_dir = ccrig_prom.run_dirs()[-1]
    assert leftovers(int(run_dir.name.rsplit("-", 1)[1])) == []
    summary = ccrig_prom.summary()
    assert summary["pause"]["scaling"]["scale"] == 10.0
    assert json.loads((run_dir / "env.json").read_text())["pause"]["mode"] == "emulated"
    point = summary["points"][0]

    # with PAUSE: node 2 (B2) does not overflow, node 1 (B1) drops instead; XOFF and XON both happened
    on = point["pause"]
    assert on["node2_dropped"] <= 2, on
    assert on["node1_dropped"] > 0, on
    assert on["xoff"] > 0 and on["xon"] > 0 and on["paused_s"] > 0, on
    rep = point["repetitions"][0]["pause"]
    assert rep["reaction_s"]["n"] == on["xoff"] + on["xon"]
    lat = list(csv.DictReader(open(run_dir / "points/000/rep0/pause_latency.csv")))
    assert len(lat) == rep["reaction_s"]["n"] and all(float(r["latency_s"]) > 0 for r in lat)
    events = list(csv.DictReader(open(run_dir / "points/000/rep0/pause_events.csv")))
    assert {e["event"] for e in events} == {"xoff", "xon"}
    # the controller's own account: it looked at the queue all along (a gap over 1 % of the window spoils the
    # repetition: pause_run.judge) and what CPU that took
    ctl = rep["controller"]
    assert 0 < ctl["longest_gap_s"] < 1.0 and 0 < ctl["cpu_cores"] < 1, ctl

    # the system's loss counts every queue on the path: node 1's drops too (node 2 hardly drops with PAUSE), each
    # queue with its own rows in qdisc.csv and its own series
    qrows = list(csv.DictReader(open(run_dir / "points/000/rep0/qdisc.csv")))
    n1_drops = max(float(r["dropped"]) for r in qrows if r["node"] == "n1" and r["parent"] == "root")
    assert n1_drops > 0 and {r["node"] for r in qrows} >= {"n1", "n2"}
    with open(run_dir / "points/000/rep0/intervals.csv") as f:
        sysrows = [r for r in csv.DictReader(f) if r["flow"] == "all"]
    # each interval's loss, recomputed from the queues' raw counters taken to its two boundaries (linear between
    # the readings around each, at the times they were read): (node 1's drops + node 2's) / (node 2's sent +
    # dropped + node 1's drops)
    at: dict[str, dict[str, dict]] = {}
    for r in qrows:
        if r["parent"] == "root":
            at.setdefault(r["t"], {})[r["node"]] = r
    reads = [(float(t), at[t]) for t in sorted(at, key=float) if {"n1", "n2"} <= set(at[t])]
    # one reading before the traffic, one at each boundary, one after the traffic
    assert len(sysrows) >= 5 and len(reads) == len(sysrows) + 2, (len(sysrows), len(reads))
    times = [t for t, _ in reads]
    cum = lambda node, key, x: float(numpy.interp(x, times, [float(q[node][key]) for _, q in reads]))
    for r in sysrows:
        a, b = float(r["t_start"]), float(r["t_end"])
        d = {n: cum(n, "dropped", b) - cum(n, "dropped", a) for n in ("n1", "n2")}
        offered = cum("n2", "sent_packets", b) - cum("n2", "sent_packets", a) + d["n2"] + d["n1"]
        want = (d["n1"] + d["n2"]) / offered if offered else 0.0
        assert abs(float(r["loss"] or 0) - want) < 1e-4, (r, d, offered)   # qdisc.csv keeps 6 digits of t
    log = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert {s["labels"]["node"] for s in log if s["name"] == "qdisc_dropped_packets"} >= {"n1", "n2"}

    # without PAUSE (T1 = T2 = B2): same controller, never fires; node 2 overflows
    off = point["without_pause"]["pause"]
    assert off["high"] == off["low"] == 20 and off["paused"] is False
    assert off["xoff"] == off["xon"] == 0 and off["paused_s"] == 0, off
    assert off["node2_dropped"] > 5, off
    assert (run_dir / "points/000/baseline/rep0/intervals.csv").is_file()

    # the gain: both goodputs and the increase in percent with its interval around it
    gain = point["pause_gain"]
    assert gain["with_pause_bps"] == point["system"]["goodput_bps"]["mean"]
    assert gain["without_pause_bps"] == point["without_pause"]["system"]["goodput_bps"]["mean"]
    assert gain["percent"] == 100 * (gain["with_pause_bps"] / gain["without_pause_bps"] - 1)
    assert gain["ci95"][0] <= gain["percent"] <= gain["ci95"][1]

    # the files workload: transfers completed, with completion times, on every flow
    files = point["repetitions"][0]["transfers"]
    assert len(files["flows"]) == 4 and all(f["completed"] >= 1 for f in files["flows"]), files
    assert all(f["completion_s"]["median"] > 0 for f in files["flows"])

    # Prometheus has the controller's counters of both runs: non-zero with PAUSE, zero without
    # (the label pause tells the two runs of the point apart)
    run = summary["run"]
    for metric in ("ccrig_pause_xoff_total", "ccrig_pause_xon_total", "ccrig_pause_paused_seconds_total"):
        series = query(prometheus.url, f'max_over_time({metric}{{run="{run}"}}[1h])')
        by = {s["metric"]["pause"]: float(s["value"][1]) for s in series}
        assert set(by) == {"on", "off"} and by["on"] > 0 and by["off"] == 0, (metric, by)
        assert all(s["metric"]["node"] == "n2" for s in series)
    assert query(prometheus.url, f'ccrig_pause_reaction_seconds{{run="{run}",pause="on",stat="p50"}}[1h]')
    goodput = query(prometheus.url, f'count_over_time(ccrig_system_goodput_bytes_per_second{{run="{run}"}}[1h])')
    assert sorted(s["metric"]["pause"] for s in goodput) == ["off", "on"]


def test_bad_pause_input_is_refused_before_anything_is_set_up(ccrig):
    p = ccrig.run({**chain(), "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt"}}})
    assert p.returncode == 2 and "pause_gain" in p.stderr and "pause_chain" in p.stderr, p.stderr
    spec = chain()
    spec["topology"]["pause"]["mode"] = "ethtool"
    p = ccrig.run(spec)
    assert p.returncode == 2 and "topology.pause.mode" in p.stderr and "netns" in p.stderr, p.stderr
    spec = chain()
    spec["flows"][0]["workload"]["size"] = "10pkt"
    p = ccrig.run(spec)
    assert p.returncode == 2 and "flows[0].workload.size" in p.stderr, p.stderr
    p = ccrig.run({**chain(), "testbed": "mininet"})
    assert p.returncode == 2 and "testbed: got 'mininet'" in p.stderr, p.stderr
    assert ccrig.run_dirs() == []
