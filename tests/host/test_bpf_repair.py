"""The BPF glue puts right a threshold the kernel left garbage (tcp_modules/bpf_fault.py: a skipped ssthresh
leaves a return-thunk address in snd_ssthresh, and the window becomes it when recovery ends), on any kernel.

The fault itself comes only when a softirq interrupts PID 1, so the test makes its own: the alphabeta family
built with CCRIG_TEST_SKIP_EVERY=2, whose ssthresh returns the word the fault leaves at every second loss and
moves no state, as a skipped program would. One flow of that build as ab_standard on the law tests' path
(10 Mbit/s htb + 24-packet pfifo): without the repair its window reads some 2*10^9 segments in several samples
running (3 at 10 ms in a check by hand on this short path; seconds in a 30-flow study at 500 ms); with it, a window
beyond any law's is never seen in two samples running, each garbage threshold is counted as repaired, and every
loss still gives ssthresh = beta W.
"""
from __future__ import annotations

import itertools
import os
import statistics
import tempfile
from pathlib import Path

import pytest

from ccrig.commands import Commands
from ccrig.tcp_modules import bpf, bpf_fault, bpfobj, laws
from ccrig.tcp_modules.loaded import Loaded
from ccrig.tcp_modules.systems import LocalSystem
from support.lawflow import bottleneck, bpf_skip_reason, loss_events, run_flow

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "tcp_modules"
PREFIX = f"ccR-{os.getpid()}"
EVERY = 2
SECONDS = 6


if (_why := bpf_skip_reason(PREFIX, "ab_standard")):
    pytestmark = [pytest.mark.host, pytest.mark.skip(reason=_why)]


@pytest.fixture(scope="module")
def faulty():
    """ab_standard from a build whose ssthresh returns the fault's word at every EVERY-th call, registered under
    a generated name (so `ccrig clean --prefix` finds it), unregistered at the end."""
    commands = Commands(None)
    law = laws.PRESETS["ab_standard"]
    name = bpf.generated_name(PREFIX, law)
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}-") as tmp:
        # the Makefile's own rule with one flag more, into the test's folder (its vmlinux.h dumped there too)
        template = Path(tmp) / bpfobj.OBJECT[law.law]
        commands.run(["make", "-C", str(MODULES), f"BUILD={tmp}",
                      f"BPF_EXTRA_CFLAGS=-DCCRIG_TEST_SKIP_EVERY={EVERY}", str(template)], timeout=300)
        obj = Path(tmp) / f"{name}.bpf.o"
        obj.write_bytes(bpfobj.variant(template, law, name))
        commands.run(["bpftool", "struct_ops", "register", str(obj)])
        (map_id,) = [i for i, n in bpf.struct_ops_maps(commands) if n == name]
        try:
            yield Loaded("ab_standard", "bpf", name, law, obj, None, map_id)
        finally:
            bpf.unregister_id(commands, map_id)
    assert name not in LocalSystem().available()


def test_garbage_threshold_is_repaired(faulty):
    with bottleneck(PREFIX, 24) as bed:
        _, samples = run_flow(bed, faulty.kernel_name, SECONDS)
    counts = bpf.globals_of(LocalSystem(), faulty.bpf_id)
    injected = counts["ccrig_test_calls"] // EVERY
    assert injected >= 2, f"only {counts['ccrig_test_calls']} losses in {SECONDS} s: the test made too few faults"
    # the harm: a window of millions from the garbage, at the ACK that met it (PRR: what that ACK sent is sent, and
    # a sample may catch it before the next) and again when recovery ends; repaired, it never lasts into a second
    # sample (10 ms, several ACKs of this flow) where it lasted seconds
    garbage = [f["snd_cwnd"] >= bpf_fault.LIMIT for _, f in samples]
    longest = max((sum(1 for _ in run) for hit, run in itertools.groupby(garbage) if hit), default=0)
    assert longest <= 1, [f["snd_cwnd"] for _, f in samples if f["snd_cwnd"] >= bpf_fault.LIMIT][:5]
    # each garbage threshold repaired at the next ACK; one made at the flow's very end may meet none (a real fault
    # of the kernel's during the test adds one)
    assert injected - 1 <= counts["ccrig_repaired"] <= injected + 2, counts
    assert bpf.repaired(LocalSystem(), faulty) == counts["ccrig_repaired"]
    # the threshold is the law's at every loss, the injected ones included (a sample may still catch the garbage
    # in the millisecond before the next ACK: the median reads past it)
    events = loss_events(samples)[1:]   # the first ends slow start, whose W the samples underestimate
    assert len(events) >= 2 * EVERY, events
    assert statistics.median(ss / w for w, ss, _ in events) == pytest.approx(laws.PRESETS["ab_standard"].beta,
                                                                              abs=0.08), events
