"""Differential check: TCP(1, 1/2) and the polynomial AIMD preset, as BPF congestion controls, against the
kernel's own reno on the same path, through `ccrig run` (the runner and its sampler, written by others).

Same law, other implementation: mean goodput within 10 % of reno's, retransmission rates of the same order.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ccrig.commands import Commands
from ccrig.tcp_modules.manager import CcManager
from ccrig.tcp_modules.systems import available

pytestmark = pytest.mark.host
PREFIX = f"ccB-{os.getpid()}-diff"
INFINITE_SSTHRESH = 0x7FFFFFFF


def _problems() -> list[str]:
    if os.geteuid() != 0:
        return ["needs root (network namespaces, bpftool struct_ops)"]
    return CcManager(Commands(None), PREFIX, "bpf").preflight(["ab_standard"])


def run(out: Path, ccs: list[str]) -> tuple[dict, list[str]]:
    """One `ccrig run` with a point per cc; its summary and the points the kernel's BPF struct_ops fault hit
    (see tests/host/test_cc_bpf.py kernel_anomaly: a garbage ssthresh, then cwnd ~10^9)."""
    spec = {
        "name": "cc-differential",
        "testbed": "netns",
        "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "30pkt", "qdisc": "pfifo"}},
        "flows": [{"cc": "reno"}],
        "duration": "8s", "interval": "1s", "warmup": 2, "repetitions": 1,
        "sweep": {"flows[0].cc": ccs},
    }
    out.mkdir()
    path = out / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = subprocess.run([sys.executable, "-c", "from ccrig.experiments.cli import main; main()", "run", str(path),
                           "--out", str(out / "runs"), "--prometheus", "off", "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (rundir,) = (out / "runs").iterdir()
    summary = json.loads((rundir / "summary.json").read_text())
    hit = []
    for p in summary["points"]:
        with open(rundir / "points" / f"{p['index']:03d}" / "rep0" / "trace.csv") as f:
            for row in csv.DictReader(f):
                ss, cwnd = int(float(row["ssthresh"])), int(float(row["cwnd"]))
                if ss != INFINITE_SSTHRESH and ss > 1 << 30 or cwnd > 1 << 24:
                    hit.append(f"{p['params']['flows[0].cc']} (ssthresh {ss}, cwnd {cwnd} at t={row['t']})")
                    break
    return summary, hit


@pytest.mark.skipif(bool(_problems()), reason="; ".join(_problems()))
def test_alphabeta_and_poly_aimd_match_reno(tmp_path):
    m = CcManager(Commands(None), PREFIX, prefer="bpf")
    names = m.prepare(["ab_standard", "poly_aimd"])
    try:
        ccs = ["reno", names["ab_standard"], names["poly_aimd"]]
        summary, hit = run(tmp_path / "a", ccs)
        if hit:
            # not the laws' doing (it hits the kernel's reno wrapped in BPF too): measure again, once
            summary, again = run(tmp_path / "b", ccs)
            assert not again, f"the kernel's BPF struct_ops fault hit two runs in a row: {hit}; {again}"
    finally:
        m.release()
    assert not set(names.values()) & set(available())
    flows = {p["params"]["flows[0].cc"]: p["flows"][0] for p in summary["points"]}
    reno = flows["reno"]
    for preset, name in names.items():
        f = flows[name]
        assert f["cc"] == name
        assert f["goodput_bps"]["mean"] == pytest.approx(reno["goodput_bps"]["mean"], rel=0.10), preset
        r, r0 = f["retrans_rate"]["mean"], reno["retrans_rate"]["mean"]
        assert r0 > 0 and r0 / 3 <= r <= 3 * r0, (preset, r, r0)
