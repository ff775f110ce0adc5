"""A family added as three files reaches the kernel: lin (additive increase, additive decrease;
tests/support/newfamily.py) in a copy of tcp_modules is built as a BPF object by the copy's own Makefile,
registered by the copy's own manager under its generated names, carries an iperf3 flow whose TCP_INFO trace
shows its decrease (beta segments off at every loss, not a fraction), and goes away; its kernel module builds
against the distribution's headers with its presets and parameters.

Path: tests/support/lawflow.py's bottleneck (htb 10 Mbit/s + pfifo 24 packets), its flow and its cut of the
kernel's BPF struct_ops fault.
"""
from __future__ import annotations

import os
import statistics
import subprocess
from pathlib import Path

import pytest

from ccrig.commands import Commands
from ccrig.tcp_modules.manager import CcManager
from ccrig.tcp_modules.systems import available
from support import newfamily
from support.lawflow import bottleneck, law_flow, run_events

pytestmark = pytest.mark.host

PREFIX = f"cclw-{os.getpid()}"
BETA = 8      # segments off at a loss: far from the halving (about 13 here) and from Reno's
HEADERS = sorted(p for p in Path("/lib/modules").glob("*/build") if (p / "Makefile").exists())


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, bpftool struct_ops)"
    return "; ".join(CcManager(Commands(None), PREFIX, "bpf").preflight(["ab_standard"])) or None


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    root = newfamily.copy_with_family(tmp_path_factory.mktemp("family"))
    newfamily.write_vectors(root)
    return root


def test_new_family_runs_as_bpf(copy):
    if _skip_reason():
        pytest.skip(_skip_reason())
    manager = newfamily.load(copy, "manager")
    m = manager.CcManager(Commands(None), PREFIX, prefer="bpf")
    custom = {"law": "lin", "alpha": 1, "beta": BETA}
    names = m.prepare(["lin_three", custom])
    try:
        assert (copy / "build" / "tcp_lin.bpf.o").exists()      # the copy's Makefile built it
        have = available()
        assert all(n.startswith("crl_") and n in have for n in names.values()), (names, have)
        assert {d["parameters"]["law"] for d in m.describe()} == {"lin"}
        with bottleneck(PREFIX, 24) as bed:
            result, _, runs = law_flow(bed, names["lin(alpha=1,beta=8)"])
        assert result["end"]["sender_tcp_congestion"] == names["lin(alpha=1,beta=8)"]
        events = run_events(runs)
        assert len(events) >= 2, events
        # ssthresh = W - beta at every loss (W is seen up to a segment low): an additive decrease
        off = statistics.median(w - ss for w, ss, _ in events)
        print(f"lin beta={BETA}: median W - ssthresh {off} over {len(events)} losses")
        assert abs(off - BETA) <= 2, events
        assert statistics.median(ss / w for w, ss, _ in events) > 0.6, events   # not a halving
    finally:
        assert m.release() == []
    assert not set(names.values()) & set(available())


@pytest.mark.skipif(not HEADERS, reason="no kernel headers under /lib/modules/*/build (`make deps`)")
def test_new_family_module_builds(copy):
    kdir = HEADERS[-1]
    out = subprocess.run(["make", "-C", str(copy), "modules", f"KDIR={kdir}"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "warning:" not in out.stderr.lower() + out.stdout.lower(), out.stderr[-2000:]
    info = subprocess.run(["modinfo", str(copy / "kmod" / "tcp_lin.ko")], capture_output=True, text=True,
                          check=True).stdout
    assert "AIAD congestion control: lin_one, lin_three, lin_param" in info
    assert {line.split(":")[1].strip() for line in info.splitlines() if line.startswith("parm:")} == \
        {"alpha", "beta", "halve_first"}
    assert "lin_param: segments removed on a loss, 0 < value <= 100, decimal (default 1)" in info
