"""Keshav's Generic flow control as a law (tcp_modules/families/generic.py): a constant window, kept through a
retransmission timeout. On a real path (1 Mbit/s: 12 ms a packet, so a slow start from one packet lasts some
200 ms, which 10 ms TCP_INFO samples see) that goes down for a second, the sender's timer fires and backs off
(the kernel's MIB counts the timeouts); once the path is back, the first ACK restores Generic's whole window. The
nearest law before it, alpha/beta 5/0.99 with the same sender settings (the Keshav study's specs), slow-starts
back from one packet instead: the check tells them apart.

The law loads as a kernel module where the kernel takes them, else as BPF (`auto`): here BPF (this kernel's
glue, bpf/ccrig_tcp.bpf.h), on the distribution kernel of the vm tier the module (kmod/ccrig_kmod.h), which
runs this file too (tests/vm/test_vm_tier.py HOST_TESTS_BOTH_WAYS)."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from ccrig.commands import Commands
from ccrig.experiments.run.sender_tcp import SenderTcp, TcpSettings
from ccrig.tcp_modules.manager import CcManager
from support.lawflow import bottleneck, through_blackout

pytestmark = pytest.mark.host

PREFIX = f"ccgn-{os.getpid()}"
W = 20
# the Keshav specs' Generic sender: no fast retransmit, RACK, tail loss probe or F-RTO, the window pinned
SENDER = TcpSettings(recovery="none", frto=False, tlp=False, reordering=300, initcwnd=W, rto_min="20ms")
GENERIC = {"law": "generic", "window": W}
NEAREST = {"law": "alphabeta", "alpha": 5, "beta": 0.99}
AFTER_S = 0.5   # of samples from the first segment delivered after the outage


def _after_outage(prefix: str, cc: str) -> tuple[list[tuple[int, int]], int]:
    """(segments delivered since the outage began, window) for each sample of the AFTER_S seconds from the first
    segment delivered once the path is back (the backed-off timer may wait a second more), and the timeouts."""
    with bottleneck(prefix, 40, rate="1mbit") as bed:   # 40 packets: the window alone never overflows the queue
        SenderTcp(bed, [(0, SimpleNamespace(tcp=SENDER, max_window=W), "s1", "d1")]).apply()
        # 10 s: a timer backed off three or four times during the second down (RTO 0.3-0.5 s behind the 40-packet
        # queue) may wait 2-4 s more before its first retransmission gets through; 7 s left too little on a busy host
        samples, back, timeouts = through_blackout(bed, cc, seconds=10)
    before = max(f["delivered"] for t, f in samples if t <= back)
    first = next((t for t, f in samples if t > back and f["delivered"] > before), None)
    assert first is not None, (f"{cc}: nothing delivered after the path came back at {back:.3f} (last sample "
                               f"{samples[-1][0]:.3f}, {timeouts} timeouts)")
    return [(f["delivered"] - before, f["snd_cwnd"]) for t, f in samples if first <= t <= first + AFTER_S], \
        timeouts


def test_generic_keeps_its_window_through_a_timeout():
    with CcManager(Commands(None), PREFIX) as m:
        names = m.prepare([GENERIC, NEAREST])
        forms = {d["kernel_name"]: d["form"] for d in m.describe()}
        generic, g_timeouts = _after_outage(f"{PREFIX}g", names["generic(window=20)"])
        nearest, n_timeouts = _after_outage(f"{PREFIX}n", names["alphabeta(alpha=5,beta=0.99)"])
    print(f"{forms}; (delivered, window) after the outage: generic {generic} ({g_timeouts} timeouts), nearest "
          f"{nearest} ({n_timeouts})")
    # a second down: the timer fires at least twice (its first timeout and one backed off)
    assert g_timeouts >= 2 and n_timeouts >= 2, (g_timeouts, n_timeouts)
    # Generic's window is whole from the first segment delivered on (a sample in ten may catch the kernel between
    # an ACK and the law's callback, or this kernel's skipped BPF callback: tcp_modules/bpf_fault.py)
    windows = [w for _, w in generic]
    assert len(windows) >= 5 and sum(w == W for w in windows) >= 0.9 * len(windows), generic
    # the nearest law starts again from one packet and slow-starts: a segment more a segment delivered, so its
    # window stays below W until some W segments are through (the check can fail; counted, not timed, so a slow
    # sampler cannot decide it)
    early = [(d, w) for d, w in nearest if 1 <= d <= W // 2]
    assert early and all(w <= d + 2 for d, w in early), nearest
