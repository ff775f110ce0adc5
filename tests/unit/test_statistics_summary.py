"""Statistics in summary.json, the terminal, reports and compare: each confidence interval with its method; Jain over
throughput beside Jain over goodput; goodput above T_max flagged; the seeded order; degraded intervals; the
batch-aware ratio interval. Every number checked against a hand computation."""
from __future__ import annotations

import math

import pytest

from ccrig.analysis import intervals, metric_table, stats
from ccrig.analysis.compare import ratio_ci
from ccrig.experiments.run import schedule
from ccrig.experiments.run import summary
from ccrig.experiments.cli.tables import _fmt, ci_note
from ccrig.experiments.run.pause_run import gain
from ccrig.experiments.report.summary import ci_rows, fmt_stat


def test_jain_over_throughput_by_hand():
    # throughputs 2, 4, 6 Mbit/s: (12)² / (3 · (4 + 16 + 36)) = 144 / 168; goodputs equal would give 1
    rows = [{"throughput_bps": 2e6, "goodput_bps": 1e6}, {"throughput_bps": 4e6, "goodput_bps": 1e6},
            {"throughput_bps": 6e6, "goodput_bps": 1e6}, {"throughput_bps": 9e6, "active": False}]
    assert intervals.jain_throughput(rows) == pytest.approx(144 / 168)
    assert intervals.jain_throughput([{"throughput_bps": 1e6, "active": False}]) is None


def test_stat_of_keeps_the_old_keys_and_says_the_method():
    none = summary.stat_of(stats.within_run([1.0, 2.0, 3.0]))
    assert none["ci95"] is None and none["ci"]["method"] == "none" and "fewer than" in none["ci"]["reason"]
    assert none["mean"] == pytest.approx(2.0) and none["n"] == 3
    runs = summary.stat_of(stats.over_runs([1.0, 2.0, 3.0]))
    half = stats.t_quantile(0.95, 2) * 1.0 / math.sqrt(3)   # std of 1, 2, 3 is 1
    assert runs["ci95"] == pytest.approx([2 - half, 2 + half]) and runs["ci"]["method"] == "runs"
    assert runs["ci"]["n_eff"] == 3


def test_a_point_over_repetitions_uses_the_runs():
    reps = [summary.stat_of(stats.within_run([m] * 10)) for m in (1.0, 2.0, 3.0)]
    assert all(r["ci"]["method"] == "batches" for r in reps)
    p = summary.over_repetitions(reps, 0.95)
    assert p["ci"]["method"] == "runs" and p["mean"] == pytest.approx(2.0)
    # one repetition: its own interval
    assert summary.over_repetitions(reps[:1], 0.95) == reps[0]
    # the 3σ level widens it by t(0.9973, 2) / t(0.975, 2)
    wide = summary.over_repetitions(reps, stats.sigma_level(3))
    assert wide["ci"]["half_width"] / p["ci"]["half_width"] == pytest.approx(
        stats.t_quantile(stats.sigma_level(3), 2) / stats.t_quantile(0.95, 2))


def _goodput(mean, half):
    return {"mean": mean, "ci95": None if half is None else [mean - half, mean + half],
            "ci": {"method": "none" if half is None else "runs"}}


def test_goodput_above_t_max_beyond_the_ci_is_a_measurement_problem():
    t_max = 9.5e6
    entry = {"system": {"goodput_bps": _goodput(9.6e6, 0.2e6)},   # 9.4 .. 9.8: within the noise of T_max
             "flows": [{"flow": 0, "goodput_bps": _goodput(9.8e6, 0.2e6)},   # 9.6 .. 10: beyond
                       {"flow": 1, "goodput_bps": _goodput(9.6e6, None)},    # no interval: flagged
                       {"flow": 2, "goodput_bps": _goodput(5e6, None)}]}
    problems = summary.goodput_problems(entry, t_max)
    assert len(problems) == 2
    assert problems[0].startswith("flow 0: goodput 9.800 Mbit/s is above T_max 9.500") and "beyond" in problems[0]
    assert problems[1].startswith("flow 1:") and "no confidence interval" in problems[1]


def test_degraded_intervals_make_a_repetition_unreliable_past_the_share():
    rows = [{"degraded": i in (0, 3)} for i in range(11)]   # interval 0 is the warm-up
    d = summary.degraded(rows, 1)
    assert d == {"intervals": [3], "share": 0.1, "unreliable": False}
    rows[5]["degraded"] = True
    assert summary.degraded(rows, 1)["unreliable"] is True
    assert summary.degraded([{"degraded": False}] * 5, 1) is None


def test_the_order_is_seeded_and_covers_every_pair_once():
    reps = {0: 3, 1: 3, 2: 3}
    a, b = schedule.order(reps, 1), schedule.order(reps, 2)
    assert sorted(a) == sorted(b) == [(p, r) for p in range(3) for r in range(3)]
    assert a == schedule.order(reps, 1) and a != b
    # a variant (PAUSE's baseline) is a pair of its own in the same shuffle
    c = schedule.order(reps, 1, {1: ["baseline"]})
    assert sorted(x for x in c if len(x) == 3) == [(1, r, "baseline") for r in range(3)]
    assert sorted(x for x in c if len(x) == 2) == sorted(a)
    assert schedule.derived_seed("default-20261123-1-1") != schedule.derived_seed("default-20261123-1-2")


def test_ratio_interval_from_each_mean_interval_by_hand():
    num = {"mean": 110.0, "ci": {"method": "batches", "half_width": 4.0, "level": 0.95}}
    den = {"mean": 100.0, "ci": {"method": "runs", "half_width": 3.0, "level": 0.95}}
    r = ratio_ci(num, den)
    assert r["ratio"] == pytest.approx(1.1)
    assert r["half"] == pytest.approx(1.1 * math.sqrt((4 / 110) ** 2 + (3 / 100) ** 2))
    assert r["method"] == "delta method over batches and runs"
    none = ratio_ci(num, {"mean": 100.0, "ci": {"method": "none", "reason": "one repetition"}})
    assert none["half"] is None and none["reason"] == "one repetition"
    g = gain({**num, "std": 1, "n": 3}, {**den, "std": 1, "n": 3})
    assert g["percent"] == pytest.approx(10.0)
    assert g["ci95"] == pytest.approx([100 * (1.1 - r["half"] - 1), 100 * (1.1 + r["half"] - 1)])
    assert g["ci_method"] == r["method"]


def test_the_terminal_and_the_report_mark_each_interval_with_its_method():
    runs = summary.stat_of(stats.over_runs([1e6, 2e6, 3e6]))
    goodput = metric_table.BY_NAME["goodput_bps"]
    assert _fmt(runs, goodput) == "2.000 ±2.484 r"   # in Mbit/s: t(0.975, 2) = 4.303 times 1/sqrt(3)
    batches = summary.stat_of(stats.within_run([1.0] * 10))
    assert _fmt(batches).endswith(" b")
    assert _fmt(summary.stat_of(stats.within_run([1.0, 2.0]))) == "1.500 (no CI)"
    assert "r = Student's t over the 3 repetitions" in ci_note({"repetitions": 3, "ci_level": 0.95})
    assert fmt_stat(runs, 1e-6).endswith(" r") and fmt_stat(summary.stat_of(stats.within_run([1.0])), 1.0) == \
        "1 (no CI)"
    rows = ci_rows([{"index": 0, "system": {"goodput_bps": runs}}], [("goodput_bps", "goodput", 1e-6)])
    assert rows == [["0", "goodput", "runs", "3", "3", "–", ""]]


def test_resume_refuses_another_spec_and_reads_the_complete_pairs(tmp_path):
    import json

    import yaml

    from ccrig.errors import InputError
    from ccrig.experiments.run.archive import RunArchive, open_to_resume
    run = tmp_path / "run"
    run.mkdir()
    archive = RunArchive(run)
    raw = {"name": "x", "duration": "8s", "repetitions": 3}
    archive.write_spec(raw)
    archive.write_json("summary.json", {"points": [], "seed": 5})
    with pytest.raises(InputError, match=r"--resume: the spec differs .*fields repetitions"):
        open_to_resume(run, {**raw, "repetitions": 2})
    with pytest.raises(InputError, match=r"--resume: got .*expected a run directory"):
        open_to_resume(tmp_path, raw)
    archive.write_repetition(1, 2, {"system": {}})
    (archive.rep_dir(0, 0) / "intervals.csv").write_text("cut short")   # an interrupted attempt
    got, summary_json, _ = open_to_resume(run, yaml.safe_load(yaml.safe_dump(raw)))
    assert got.repetitions_done() == {(1, 2): {"system": {}}} and summary_json["seed"] == 5
    got.clear_repetition(0, 0)
    got.clear_repetition(1, 2)   # complete: kept
    assert not (run / "points/000/rep0").exists() and (run / "points/001/rep2/repetition.json").is_file()
    log = run / "samples.jsonl"
    lines = [{"name": "a", "labels": {"point": "0", "rep": "0"}}, {"name": "a", "labels": {"point": "1", "rep": "2"}}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"cut')
    assert got.drop_samples("samples.jsonl", {(0, 0)}) == 2
    assert [json.loads(x)["labels"]["point"] for x in log.read_text().splitlines()] == ["1"]


def test_min_rtt_floor_and_the_flows_below_it_by_hand():
    class Dumbbell:
        rtt = 0.02

    class Chain:
        rtt = 0.1
        scale = 10.0
    # 1514-byte frames at 10 Mbit/s: 1.2112 ms; plus 20 ms, or 100 ms / 10
    assert summary.min_rtt_floor(Dumbbell(), 1514, 10e6) == pytest.approx(0.02 + 0.0012112)
    assert summary.min_rtt_floor(Chain(), 1514, 10e6) == pytest.approx(0.01 + 0.0012112)
    assert summary.min_rtt_floor(object(), 1514, 10e6) == pytest.approx(0.0012112)
    # the check reads the data packets' least RTT, never TCP's min_rtt (the handshake's 6 us through an idle shaper)
    # and allows TCP's timestamp tick (a retransmission's RTT sample reads up to 1 ms low): 0.3 ms passes
    entry = {"flows": [{"flow": 0, "data_min_rtt_s": 1e-4, "min_rtt_s": {"mean": 6e-6}},
                       {"flow": 1, "data_min_rtt_s": 0.014, "min_rtt_s": {"mean": 6e-6}},
                       {"flow": 2, "data_min_rtt_s": None}, {"flow": 3, "data_min_rtt_s": 3e-4}]}
    problems = summary.min_rtt_problems(entry, 0.0012112)
    assert len(problems) == 1 and problems[0].startswith("flow 0: its data packets' least RTT (smoothed) 0.100 ms")


def test_data_min_rtt_is_the_least_smoothed_rtt_in_the_measured_window():
    # samples: (time, TCP_INFO); the handshake's few microseconds sit in min_rtt_us, never in what is read
    trace = [(0.5, {"rtt_us": 900, "min_rtt_us": 5}), (1.0, {"rtt_us": 40000, "min_rtt_us": 5}),
             (2.0, {"rtt_us": 25000, "min_rtt_us": 5}), (2.5, {"rtt_us": 0}), (3.0, {"rtt_us": 0xFFFFFFFF}),
             (9.0, {"rtt_us": 1000, "min_rtt_us": 5})]
    assert summary.data_min_rtt(trace, 1.0, 5.0) == pytest.approx(0.025)
    assert summary.data_min_rtt(trace, 6.0, 8.0) is None


def test_sigma_option_is_checked_and_a_level_is_a_spec_field(tmp_path):
    from typer.testing import CliRunner

    from ccrig.experiments.cli import app as cli
    from ccrig.experiments import spec as specmod
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ntopology: {name: dumbbell, bottleneck: {rate: 10mbit}}\nflows: [{cc: cubic}]\n"
                    "duration: 5s\n")
    r = CliRunner().invoke(cli.app, ["run", str(path), "--sigma", "40", "--prometheus", "off"])
    assert r.exit_code != 0 and "--sigma: got 40" in str(r.exception)
    _, exp = specmod.load(path, [f"ci={stats.sigma_level(3)!r}", "seed=9"])
    assert exp.ci == pytest.approx(0.9973, abs=1e-4) and exp.seed == 9
    with pytest.raises(Exception, match="ci"):
        specmod.load(path, ["ci=1.5"])


def test_a_flows_counts_are_sums_over_its_measured_intervals():
    # warm-up interval 0 left out, as are an interval a kernel fault touched and one the flow was not active in;
    # the loss over the whole repetition is lost / sent of what is kept: 3 / 300, not the mean of 1/100 and 2/200
    rows = [{"segs_sent": 50, "segs_lost": 9}, {"segs_sent": 100, "segs_lost": 1},
            {"segs_sent": 70, "segs_lost": 7, "fault": True}, {"segs_sent": 200, "segs_lost": 2},
            {"segs_sent": 0, "segs_lost": 0, "active": False}]
    assert summary.counts(rows, warmup=1) == {"segs_sent": 300.0, "segs_lost": 3.0}
    row = intervals.flow_interval(intervals.FlowSeries([(0.0, {"data_segs_out": 0, "total_retrans": 0,
                                                               "dsack_dups": 0}),
                                                        (1.0, {"data_segs_out": 100, "total_retrans": 5,
                                                               "dsack_dups": 2})]), 0.0, 1.0, 1e6)
    assert (row["segs_sent"], row["segs_retrans"], row["segs_lost"]) == (100, 5, 3)   # spurious ones are no loss
