"""Differential check: TCP(1, 1/2) and the polynomial AIMD preset, as BPF congestion controls, against the
kernel's own reno on the same path, through `ccrig run` (the runner and its sampler, written by others).

Same law, other implementation: mean goodput within 10 % of reno's, retransmission rates of the same order, over
the measured intervals the kernel's BPF struct_ops fault (tcp_modules/bpf_fault.py) left alone: summary.json
records the samples it hit per flow, and an interval it overlaps (and the FAULT_AFTER after it: the summary's
rule, analysis/samples.fault_exclusion) is left out, not measured again.
"""
from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ccrig.analysis import samples
from ccrig.commands import Commands
from ccrig.tcp_modules import bpf_fault
from ccrig.tcp_modules.manager import CcManager
from ccrig.tcp_modules.systems import available

pytestmark = pytest.mark.host
PREFIX = f"ccB-{os.getpid()}-diff"
WARMUP = 2
METRICS = ("goodput_bps", "retrans_rate")


def _problems() -> list[str]:
    if os.geteuid() != 0:
        return ["needs root (network namespaces, bpftool struct_ops)"]
    return CcManager(Commands(None), PREFIX, "bpf").preflight(["ab_standard"])


def run(out: Path, ccs: list[str]) -> tuple[dict, Path]:
    """One `ccrig run` with a point per cc; its summary and its run directory."""
    spec = {
        "name": "cc-differential",
        "testbed": "netns",
        "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "30pkt", "qdisc": "pfifo"}},
        "flows": [{"cc": "reno"}],
        "duration": "8s", "interval": "1s", "warmup": WARMUP, "repetitions": 1,
        "sweep": {"flows[0].cc": ccs},
    }
    out.mkdir()
    path = out / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = subprocess.run([sys.executable, "-c", "from ccrig.experiments.cli.app import main; main()", "run", str(path),
                           "--out", str(out / "runs"), "--prometheus", "off", "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (rundir,) = (out / "runs").iterdir()
    return json.loads((rundir / "summary.json").read_text()), rundir


def clean_means(rundir: Path, point: dict) -> tuple[dict, int]:
    """The point's flow mean goodput and retransmission rate over its measured intervals (all but the first
    WARMUP) that no span of the kernel's BPF struct_ops fault overlaps (tcp_modules/bpf_fault.py; the spans
    are the ones summary.json records), and how many measured intervals that left out. The fault's count in
    summary.json is checked against the archived trace on the way."""
    rep = point["repetitions"][0]
    faults = rep["kernel_fault"]
    d = rundir / "points" / f"{point['index']:03d}" / "rep0"
    with open(d / "trace.csv") as f:
        trace = [(float(r["t"]), {"snd_ssthresh": int(float(r["ssthresh"])), "snd_cwnd": int(float(r["cwnd"])),
                                  "ca_state": int(float(r["ca_state"]))})
                 for r in csv.DictReader(f) if r["flow"] == "0"]
    _, excluded = bpf_fault.clean_runs(trace)
    assert [x["excluded_samples"] for x in faults] == ([excluded] if excluded else []), (faults, excluded)
    spans = [span for x in faults for span in x["spans_s"]]
    with open(d / "intervals.csv") as f:
        every = [r for r in csv.DictReader(f) if r["flow"] == "0"]
    rows = every[WARMUP:]
    # the intervals a span overlaps and the FAULT_AFTER after each (the burst's aftermath), a warm-up one's too
    hit = {k for k, r in enumerate(every) if any(a < float(r["t_end"]) and float(r["t_start"]) < b for a, b in spans)}
    touched = {k + j for k in hit for j in range(samples.FAULT_AFTER + 1)}
    kept = [r for k, r in enumerate(every) if k >= WARMUP and k not in touched]
    assert len(kept) >= len(rows) // 2, f"the fault took {len(rows) - len(kept)} of {len(rows)} intervals"
    # an empty cell is a value the interval had none of (as analysis.stats leaves it out)
    return ({m: statistics.fmean(float(r[m]) for r in kept if r[m] != "") for m in METRICS},
            len(rows) - len(kept))


@pytest.mark.skipif(bool(_problems()), reason="; ".join(_problems()))
def test_alphabeta_and_poly_aimd_match_reno(tmp_path):
    m = CcManager(Commands(None), PREFIX, prefer="bpf")
    names = m.prepare(["ab_standard", "poly_aimd"])
    try:
        summary, rundir = run(tmp_path / "a", ["reno", names["ab_standard"], names["poly_aimd"]])
    finally:
        m.release()
    assert not set(names.values()) & set(available())
    points = {p["params"]["flows[0].cc"]: p for p in summary["points"]}
    means = {cc: clean_means(rundir, p) for cc, p in points.items()}
    for cc, (mean, left_out) in means.items():
        if not left_out:   # the same numbers as the summary's when the fault left the point alone
            for metric in METRICS:
                assert mean[metric] == pytest.approx(points[cc]["flows"][0][metric]["mean"], rel=1e-5), (cc, metric)
        else:
            print(f"{cc}: {left_out} measured intervals left out, the kernel's BPF struct_ops fault")
    reno = means["reno"][0]
    for preset, name in names.items():
        f = means[name][0]
        assert points[name]["flows"][0]["cc"] == name
        assert f["goodput_bps"] == pytest.approx(reno["goodput_bps"], rel=0.10), preset
        r, r0 = f["retrans_rate"], reno["retrans_rate"]
        assert r0 > 0 and r0 / 3 <= r <= 3 * r0, (preset, r, r0)
