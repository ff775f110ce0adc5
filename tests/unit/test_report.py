"""`analysis.report` on a small synthetic run archive written here (two sweep points, two flows, one rep)."""
import base64
import csv
import json
import re
from pathlib import Path

import pytest

from ccrig.experiments.report import report

from ccrig.experiments.report import models
from ccrig.experiments.report.summary import fmt_stat
from ccrig.analysis import metric_table
from ccrig.analysis import throughput as tp
from ccrig.errors import InputError


def stat(mean, half, n=4):
    return {"mean": mean, "std": half, "ci95": [mean - half, mean + half], "n": n}


def write_archive(root: Path) -> dict:
    points = []
    for idx, rate in enumerate((10, 20)):
        flows = []
        for f, cc in ((0, "ab_smooth"), (1, "cubic")):
            # every metric of the table has an entry (the ratios 0.1 ± 0.01); the ones the checks read their own
            flows.append({"flow": f, "cc": cc, "sender": f"h{f}", "receiver": f"r{f}",
                          **{m: stat(0.1, 0.01) for m in metric_table.names("flow")},
                          "goodput_bps": stat(rate * 0.45e6 + f * 1e5, 2e5), "throughput_bps": stat(rate * 0.47e6, 2e5),
                          "loss": stat(0.01 * (idx + 1), 0.001), "retrans_rate": stat(0.01, 0.001),
                          "rtt_s": stat(0.02 + 0.01 * f, 0.002), "min_rtt_s": stat(0.015, 0.001)})
        system = {**{m: stat(0.05 + idx / 100, 0.01) for m in metric_table.names("system")},
                  "goodput_bps": stat(rate * 0.93e6, 1e5), "throughput_bps": stat(rate * 0.95e6, 1e5),
                  "loss": stat(0.01, 0.002), "retrans_rate": stat(0.01, 0.001), "rtt_s": stat(0.025, 0.003),
                  "min_rtt_s": stat(0.015, 0.001), "jain": stat(0.98 - idx / 10, 0.01)}
        points.append({"index": idx, "params": {"topology.bottleneck.rate": rate}, "t_max_bps": rate * 0.96e6,
                       "fair_share_bps": rate * 0.48e6, "system": system, "flows": flows,
                       "repetitions": [{"rep": 0, "system": system, "flows": flows}]})
        d = root / "points" / f"{idx:03d}" / "rep0"
        d.mkdir(parents=True)
        with open(d / "trace.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["t", "flow", "cwnd", "ssthresh", "srtt_s", "bytes_acked", "bytes_sent"])
            for n in range(50):
                for f in (0, 1):
                    w.writerow([n * 0.1, f, 10 + n % 7 + f, 8, 0.02 + 0.001 * (n % 5), n * 1000, n * 1100])
        with open(d / "qdisc.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["t", "node", "dev", "kind", "handle", "parent", "sent_packets", "sent_bytes", "dropped",
                        "overlimits", "requeues", "backlog_packets", "backlog_bytes"])
            for n in range(50):
                w.writerow([n * 0.1, "r0", "eth1", "pfifo", "10:", "1:1", n * 10, n * 15000, n // 10, 0, 0,
                            n % 13, (n % 13) * 1500])
    summary = {"experiment": "synthetic", "run": "synthetic-20260101-000000-1", "kernel": "6.18.0-test",
               "testbed": "netns", "interval_s": 1.0, "intervals": 5, "warmup": 1, "repetitions": 1,
               "complete": True, "points": points}
    (root / "summary.json").write_text(json.dumps(summary))
    return summary


def test_report_writes_md_html_and_plots(tmp_path):
    run = tmp_path / "run"
    summary = write_archive(run)
    html_path = report(run)
    out = run / "report"
    assert html_path == out / "report.html"
    md = (out / "report.md").read_text()
    html = html_path.read_text()
    for name in ("sweep_topology_bottleneck_rate", "utility", "timeseries_p000", "timeseries_p001", "model"):
        png, svg = out / f"{name}.png", out / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert b"<svg" in svg.read_bytes()[:2000], name
        assert f"({name}.png)" in md
    # self-contained: every image is embedded, none is linked
    imgs = re.findall(r"<img [^>]*src='([^']*)'", html)
    assert len(imgs) == 5 and html.count("src=") == 5 and all(s.startswith("data:image/png;base64,") for s in imgs)
    assert base64.b64decode(imgs[0].split(",", 1)[1])[:4] == b"\x89PNG"
    # every summarised metric of the table has its column in the points' table, the per-flow ones in the flows'
    headers = [[c.strip() for c in line.strip().strip("|").split("|")] for line in md.splitlines()
               if line.startswith("| point |")]
    points_header, flows_header = headers[0], next(h for h in headers if h[1] == "flow")
    for m in metric_table.of(ci=True):
        assert m.heading in points_header, m.name
        assert (m.heading in flows_header) == m.has("flow"), m.name
    # the stated context
    for text in ("6.18.0-test", "1.0 s", "5 intervals", "first 1", "1 repetition"):
        assert text in md and text in html
    # numbers equal summary.json: the system goodput of point 1 and T_max, as printed
    p1 = summary["points"][1]
    assert fmt_stat(p1["system"]["goodput_bps"], 1e-6) == "18.6 ± 0.1"
    assert "| 1 | 20 | 19.2 | 9.6 | 18.6 ± 0.1 |" in md
    assert fmt_stat(p1["system"]["jain"]) in md


def test_link_events_are_marked_on_the_time_series(tmp_path):
    run = tmp_path / "run"
    write_archive(run)
    with open(run / "points/000/rep0/events.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "asked_t", "planned_t", "link", "kind", "action", "event"])
        w.writerow([1.5, 1.5, 1.5, "r1-r2", "down", "down", 0])
        w.writerow([1.7, 1.7, 1.7, "r1-r2", "down", "up", 0])
    report(run)
    svg = (run / "report/timeseries_p000.svg").read_text()
    assert "down r1-r2: down" in svg and "down r1-r2: up" in svg
    assert "down r1-r2" not in (run / "report/timeseries_p001.svg").read_text()


def test_model_rows_use_the_flows_loss_and_rtt(tmp_path):
    summary = write_archive(tmp_path / "run")
    rows = models.model_rows(summary["points"])
    smooth = next(r for r in rows if r["point"] == 0 and r["cc"] == "ab_smooth")
    assert smooth["law"] == (0.31, 0.875)
    assert smooth["gaimd_bps"] == pytest.approx(tp.gaimd(0.01, 0.02, 0.22, 1, 0.31, 0.875) * models.MSS_BYTES * 8)
    assert smooth["mathis_bps"] == pytest.approx(tp.mathis(0.01, 0.02, models.MSS_BYTES * 8))
    cubic = next(r for r in rows if r["point"] == 0 and r["cc"] == "cubic")
    assert cubic["gaimd_bps"] is None and cubic["mathis_bps"] is not None
    assert models.gaimd_law("reno") == (1.0, 0.5)


def test_report_rejects_what_is_not_a_run(tmp_path):
    with pytest.raises(InputError, match="^RUN_DIR: got .*; expected a run directory holding summary.json"):
        report(tmp_path)
    assert not (tmp_path / "report").exists()
    write_archive(tmp_path / "run")
    with pytest.raises(InputError, match=r"^--repetition: got 3; expected an integer in 0\.\.0"):
        report(tmp_path / "run", repetition=3)


def test_pause_gain_overlay_uses_the_markov_model(tmp_path):
    from ccrig.analysis import pause_markov as pm

    run = tmp_path / "run"
    summary = write_archive(run)
    chain = "topology:\n  name: pause_chain\n  link_b: {rate: 100pps, buffer: 10pkt}\n"
    (run / "spec.yaml").write_text(chain + "flows:\n- {count: 8, cc: reno, workload: {kind: files, size: 80kb}}\n")
    wire, scale = 1526, 10.0
    for p, high in zip(summary["points"], (15, 20)):
        p["pause"] = {"high": high, "low": high, "b2": 20, "scaling": {
            "scale": scale, "wire_bytes": wire, "link_a_bps": 50 * scale * wire * 8,
            "link_b_bps": 100 * scale * wire * 8, "link_c_bps": 15 * scale * wire * 8,
            "paused_bps": 2 * scale * wire * 8, "rtt_s": 0.05}}
        p["pause_gain"] = {"metric": "goodput_bps", "percent": 1.5, "ci95": [0.5, 2.5]}
        p["system"]["rtt_s"] = stat(0.1, 0.01)   # the measured smoothed RTT (queueing in it): not the model's
        # node 1 dropped 10 of 400 arrivals over two repetitions, node 2 none; the baseline: node 2 dropped 30 of 300
        p["repetitions"] = [{"rep": r, "pause": {"queues": {"node1": {"dropped": 5, "sent_packets": 195},
                                                            "node2": {"dropped": 0, "sent_packets": 190}}}}
                            for r in range(2)]
        p["without_pause"] = {"system": {"goodput_bps": stat(0.5 * p["t_max_bps"], 0.01)}, "t_max_bps": p["t_max_bps"],
                              "repetitions": [{"rep": 0, "pause": {"queues": {
                                  "node1": {"dropped": 0, "sent_packets": 300},
                                  "node2": {"dropped": 30, "sent_packets": 270}}}}]}
    (run / "summary.json").write_text(json.dumps(summary))
    rows = models.pause_rows(run, summary["points"])
    # the configured RTT (0.05 s x 10), N = 2 beside flows with idle times
    expect = pm.gain(pm.PauseParams(lam=(50.0, 1.0), mu1=100, mu2=2, nu=15, B1=10, B2=20, T1=15, T2=15, rtt=0.5))[0]
    assert rows[0]["model"] == pytest.approx(expect, rel=1e-9)
    assert rows[0]["model"] != pytest.approx(pm.gain(pm.PauseParams(lam=(50.0, 1.0), T1=15, T2=15, rtt=1.0))[0])
    assert rows[1]["model"] == 0.0  # T1 = B2: PAUSE never fires
    # §III-B beside the measurement: the loss probabilities per queue and link C's utilisation, both sides
    _, with_, without = pm.gain(pm.PauseParams(lam=(50.0, 1.0), T1=15, T2=15, rtt=0.5))
    side = rows[0]["measures"]
    assert side["with"]["P1"] == pytest.approx(10 / 400) and side["with"]["P2"] == 0.0
    assert side["without"]["P2"] == pytest.approx(0.1) and side["without"]["util"] == pytest.approx(0.5)
    assert side["with"]["model_P1"] == pytest.approx(with_.P1) and side["without"]["model_P2"] == pytest.approx(
        without.P2)
    assert side["without"]["model_util"] == pytest.approx(without.throughput / 15)
    # always-backlogged flows: N = 3, (λ1, λ1/2, 1), as the paper sets beside them (Fig. 7)
    (run / "spec.yaml").write_text(chain + "flows:\n- {count: 8, cc: reno}\n")
    bulk = models.pause_rows(run, summary["points"])
    assert bulk[0]["kw"]["lam"] == (50.0, 25.0, 1.0)
    assert bulk[0]["model"] == pytest.approx(pm.gain(pm.PauseParams(lam=(50.0, 25.0, 1.0), T1=15, T2=15,
                                                                    rtt=0.5))[0], rel=1e-9)
    # a chain without added delay has no model RTT: no model, and the note says what the archive lacks
    summary["points"][0]["pause"]["scaling"]["rtt_s"] = 0.0
    (nodelay,) = models.pause_rows(run, summary["points"][:1])
    assert nodelay["model"] is None and "rtt" in nodelay["note"]
    (run / "spec.yaml").write_text(chain + "flows:\n- {count: 8, cc: reno, workload: {kind: files, size: 80kb}}\n")
    summary["points"][0]["pause"]["scaling"]["rtt_s"] = 0.05
    report(run)
    md = (run / "report" / "report.md").read_text()
    assert f"{expect:+.2f}" in md and "(pause_gain.png)" in md
    assert f"| 0 | {with_.P1:.3f} / {without.P1:.3f} | 0.025 / 0.000 |" in md
    assert (run / "report" / "pause_gain.png").read_bytes()[:4] == b"\x89PNG"


def test_plots_name_flows_by_their_congestion_control(tmp_path):
    run = tmp_path / "run"
    write_archive(run)
    report(run)
    for name in ("utility", "timeseries_p000"):
        svg = (run / f"report/{name}.svg").read_text()
        assert "ab_smooth #0" in svg and "cubic #1" in svg, name
        assert not re.search(r">\s*flow 0\s*<", svg), name


def test_utility_diagram_draws_boxes_it_has_and_promises_none_it_cannot(tmp_path):
    from ccrig.experiments.report import plots
    run = tmp_path / "run"
    summary = write_archive(run)
    points = summary["points"]
    assert plots.utility_boxes(points) == 4
    svg = (plots.plot_utility(points, tmp_path)).with_suffix(".svg").read_text()
    assert "boxes = 95 % CI of goodput and RTT" in svg
    # one repetition and batch means too short: the flows' intervals are unknown, and the figure says so
    for p in points:
        for f in p["flows"]:
            f["goodput_bps"] = {"mean": f["goodput_bps"]["mean"], "ci95": None, "ci": {"method": "none"}}
    assert plots.utility_boxes(points) == 0
    svg = (plots.plot_utility(points, tmp_path)).with_suffix(".svg").read_text()
    assert "boxes =" not in svg and "no confidence intervals" in svg
    assert "no confidence boxes" in _caption(run, summary)



def test_utility_diagram_names_flows_at_one_place_once_and_keeps_setups_apart(tmp_path):
    from ccrig.experiments.report import plots
    long = [{"cc": "reno", "max_window": 5, "tcp": {"quickack": True, "rto_min": "100ms"}}] * 3   # a swept flows list
    def point(i, qdisc):
        at = lambda n, g, r: {"flow": n, "cc": "reno" if n < 2 else "cubic", "goodput_bps": {"mean": g},
                              "rtt_s": {"mean": r}}
        return {"index": i, "params": {"flows": long, "qdisc": qdisc},
                "flows": [at(0, 4.0e5, 0.100), at(1, 4.01e5, 0.1004), at(2, 1.0e5, 0.050)]}
    svg = plots.plot_utility([point(0, "pfifo"), point(1, "drr")], tmp_path).with_suffix(".svg").read_text()
    # the two reno flows of a setup share a place: one label names both, once per setup
    assert svg.count("reno #0, #1") == 2 and not re.search(r">\s*reno #[01]\s*<", svg), svg[:2000]
    assert svg.count("cubic #2") == 2
    # the second setup's label at that place is drawn above the first's, not over it
    ys = [float(m) for m in re.findall(r'<text[^>]*?y="([0-9.]+)"[^>]*>\s*reno #0, #1', svg)] or \
         [float(m) for m in re.findall(r'translate\([0-9.]+ ([0-9.]+)\)[^>]*>\s*reno #0, #1', svg)]
    assert len(ys) == 2 and abs(ys[0] - ys[1]) > 5, ys
    # a swept flows list is cut in the legend, the point's number telling the setups apart
    assert "…" in svg and "rto_min" not in svg

def _caption(run, summary):
    (run / "summary.json").write_text(json.dumps(summary))
    report(run)
    return (run / "report/report.md").read_text()


def test_report_lists_what_verdicts_leave_out(tmp_path):
    run = tmp_path / "run"
    summary = write_archive(run)
    summary["points"][1]["repetitions"][0]["exclusions"] = [
        {"what": "intervals", "intervals": [3, 4], "flows_hit": [1], "reason": "the kernel's BPF struct_ops fault"},
        {"what": "repetition", "reason": "kernel_fault: leaving 2 of 8"}]
    md = _caption(run, summary)
    assert "## Left out of verdicts" in md
    assert "| 1 | 0 | intervals | 3 4 | the kernel's BPF struct_ops fault |" in md
    assert "| 1 | 0 | repetition | all | kernel_fault: leaving 2 of 8 |" in md
