"""Statistics through `ccrig run` on this kernel: confidence intervals that say their method, repetitions in a seeded
random order, and resuming a sweep killed with SIGKILL.

- Three repetitions of the default dumbbell: each repetition's intervals (batch means within the run) and the
  point's (Student's t over the repetitions' means) are both in summary.json and agree: the variance of the
  repetitions' means over the batch means' estimate of it lies within F's 0.1-99.9 % quantiles (median over the
  metrics).
- The order of the (point, repetition) pairs is recorded with its seed, and another seed gives another order.
- A sweep killed (SIGKILL) once its second point is in summary.json, then `--resume`: every point once, one
  Prometheus series per flow per repetition (the live server and the archived samples).
- The default spec's run prints each CI with its method.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CCRIG, ROOT, dumbbell

FLOWS = [{"cc": "reno"}, {"cc": "cubic"}, {"cc": "bbr"}, {"cc": "cubic"}]   # the default spec's


def _variance_ratio(across: dict, within: list[dict]) -> tuple[float, int] | None:
    """(the repetitions' means' sample variance / the pooled batch-means estimate of one mean's variance, the
    latter's degrees of freedom), or None without a batch interval or with no spread. A batch interval's
    variance of the mean is std² / n_eff (analysis.stats.within_run), with batches - 1 degrees of freedom."""
    batch = [w for w in within if w["method"] == "batches" and w["n_eff"] and w["std"]]
    if not batch or not across["std"]:
        return None
    pooled = sum(w["std"] ** 2 / w["n_eff"] for w in batch) / len(batch)
    return across["std"] ** 2 / pooled, sum(w["batches"] - 1 for w in batch)


@pytest.mark.timeout(240)
def test_three_repetitions_report_both_intervals_and_a_seeded_order(ccrig):
    p = ccrig.run(dumbbell(FLOWS, duration="25s", repetitions=3, seed=1), timeout=230)
    assert p.returncode == 0, p.stderr
    s = ccrig.summary()
    assert s["seed"] == 1 and s["seed_from"] == "spec" and sorted(map(tuple, s["order"])) == [(0, 0), (0, 1), (0, 2)]
    point = s["points"][0]
    stats_ = []
    for key in ("goodput_bps", "throughput_bps", "rtt_s", "retrans_rate"):
        for across, within in [(point["system"][key], [r["system"][key] for r in point["repetitions"]])] + [
                (f[key], [r["flows"][i][key] for r in point["repetitions"]]) for i, f in enumerate(point["flows"])]:
            assert across["ci"]["method"] == "runs" and across["ci"]["n"] == 3, across
            assert all(w["ci"]["method"] in ("batches", "none") for w in within)
            f = _variance_ratio(across["ci"], [w["ci"] for w in within])
            if f:
                stats_.append(f)
    print(f"\nvariance of the repetitions' means / the batch means' estimate of it, (F, df2): "
          f"{[(round(f, 2), d) for f, d in stats_]}")
    assert stats_, "no within-run batch interval to compare"
    # Both estimate the variance of a repetition's mean, so F ~ F(2, df2) if the batch intervals hold (more if
    # repetitions differ by more than their own noise). Three runs give a rough variance (2 degrees of freedom:
    # F below 0.12 happens one run in nine), so each series' F is read as its quantile under F(2, df2), and the
    # median quantile over the series must lie within 0.1-99.9 %: by Markov's inequality a calibrated run falls
    # outside each bound with probability <= 0.2 %, however the series correlate. The upper one is the check that
    # matters: it fails batch intervals about 2x too narrow (naive t over intervals: 2-4x).
    from scipy import stats as sstats
    quantile = statistics.median(float(sstats.f.cdf(f, 2, d)) for f, d in stats_)
    assert 0.001 < quantile < 0.999, (quantile, stats_)
    assert "CI: 95 % confidence" in p.stdout, p.stdout


@pytest.mark.timeout(120)
def test_another_seed_gives_another_recorded_order(ccrig):
    spec = dumbbell([{"cc": "cubic"}], duration="3s", repetitions=2,
                    sweep={"topology.bottleneck.buffer": ["50pkt", "100pkt"]})
    orders = []
    for seed in (1, 2):
        p = ccrig.run({**spec, "seed": seed}, timeout=110)
        assert p.returncode == 0, p.stderr
        s = ccrig.summary()
        assert s["seed"] == seed
        orders.append([tuple(x) for x in s["order"]])
        done = sorted((pt["index"], r["rep"]) for pt in s["points"] for r in pt["repetitions"])
        assert done == sorted(orders[-1]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert orders[0] != orders[1], orders


@pytest.mark.timeout(300)
def test_a_sweep_killed_after_its_second_point_resumes(ccrig_prom, prometheus):
    from ccrig.experiments.telemetry.prometheus_server import query
    from ccrig.experiments.telemetry.backfill import read_samples
    from ccrig.analysis import metric_table
    spec = dumbbell([{"cc": "cubic"}, {"cc": "reno"}], duration="4s", seed=3,
                    sweep={"topology.bottleneck.buffer": ["20pkt", "50pkt", "100pkt", "150pkt"]})
    path = ccrig_prom.write(spec)
    # one pair at a time, so the kill falls between points (side by side, the four finish together)
    proc = subprocess.Popen(ccrig_prom.argv(path, "--jobs", "1"), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            dirs = ccrig_prom.run_dirs()
            if dirs and (dirs[-1] / "summary.json").is_file():
                try:
                    if len(json.loads((dirs[-1] / "summary.json").read_text())["points"]) >= 2:
                        break
                except (ValueError, KeyError):
                    pass
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        else:
            pytest.fail("the sweep never finished its second point")
        # killed at once: what the exporter held but Prometheus had not scraped yet reaches it through the resume's
        # backfill of the run's sample log
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # what the killed run left on this machine goes, as a researcher would after a crash
    subprocess.run([*CCRIG, "clean", "--prefix", f"ccrig-{proc.pid}-"], cwd=ROOT, capture_output=True, timeout=60)
    run_dir = ccrig_prom.run_dirs()[-1]
    before = json.loads((run_dir / "summary.json").read_text())
    assert before["complete"] is False and 2 <= len(before["points"]) < 4

    # another spec is refused in one line, exit 2
    other = ccrig_prom.write({**spec, "duration": "5s"}, "other.yaml")
    p = subprocess.run([*ccrig_prom.argv(other), "--resume", str(run_dir)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "--resume: the spec differs" in p.stderr and "duration" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr

    p = subprocess.run([*ccrig_prom.argv(path), "--resume", str(run_dir)], cwd=ROOT, capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert ccrig_prom.run_dirs() == [run_dir]   # appended to the same run, no new directory
    after = json.loads((run_dir / "summary.json").read_text())
    assert after["complete"] is True and [pt["index"] for pt in after["points"]] == [0, 1, 2, 3]
    assert [x["index"] for x in after["points"][:4] if x["index"] in {b["index"] for b in before["points"]}] == \
        sorted(b["index"] for b in before["points"])
    assert after["order"] == before["order"] and after["seed"] == before["seed"] == 3
    k = len(before["points"])
    assert after["resumed"][0]["points_done"] == k and after["resumed"][0]["pairs_to_run"] == 4 - k

    # the archived samples: each flow's series of each repetition once, one sample per interval
    n = 4
    per: dict[tuple, list[float]] = {}
    for smp in read_samples(run_dir / "samples.jsonl"):
        if smp.name == "flow_goodput_bytes_per_second":
            per.setdefault((smp.labels["point"], smp.labels["rep"], smp.labels["flow"]), []).append(smp.ts)
    assert sorted(per) == [(str(pt), "0", str(f)) for pt in range(4) for f in range(2)]
    assert all(len(ts) == len(set(ts)) == n for ts in per.values()), {k: len(v) for k, v in per.items()}

    # the resume turned the killed run's sample log into TSDB blocks in the server's storage; they cover its
    # finished points' intervals
    env = json.loads((run_dir / "env.json").read_text())
    blocks = [Path(b) for b in env["prometheus"]["backfilled_blocks"]]
    assert blocks and all((b / "meta.json").is_file() for b in blocks), env["prometheus"]
    first = min(ts for ts_list in per.values() for ts in ts_list)
    assert min(json.loads((b / "meta.json").read_text())["minTime"] for b in blocks) <= first * 1000 + 1

    # the live Prometheus: one series per flow per repetition (the resumed run's exporter is the same instance);
    # a backfilled block is loaded at the server's next block reload (once a minute)
    run = after["run"]
    deadline = time.monotonic() + 90
    while True:
        series = query(prometheus.url, f'last_over_time(ccrig_flow_goodput_bytes_per_second{{run="{run}"}}[1h])')
        keys = [(x["metric"]["point"], x["metric"]["rep"], x["metric"]["flow"]) for x in series]
        if len(set(keys)) == 8 or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert sorted(keys) == sorted(per), keys
    # every system metric of the table reached Prometheus as its series, Jain over throughput among them
    for m in metric_table.of("system"):
        assert query(prometheus.url, f'last_over_time(ccrig_system_{m.series}{{run="{run}"}}[1h])'), m.name


@pytest.mark.timeout(120)
def test_the_default_spec_prints_its_intervals_with_their_method(tmp_path):
    out = tmp_path / "runs"
    p = subprocess.run([*CCRIG, "run", str(ROOT / "experiments/specs/default.yaml"), "--out", str(out),
                        "--no-progress", "--prometheus", "off", "--set", "duration=12s"],
                       cwd=ROOT, capture_output=True, text=True, timeout=110, env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    assert "CI: 95 % confidence" in p.stdout, p.stdout
    # its four repetitions: Student's t over their means, never batch means within one run
    assert "every interval here is runs: Student's t over the 4 repetitions' means" in p.stdout, p.stdout
    s = json.loads((next(Path(out).iterdir()) / "summary.json").read_text())
    g = s["points"][0]["system"]["goodput_bps"]
    assert g["ci"]["method"] == "runs" and g["ci95"] is not None and s["ci_level"] == 0.95
