"""The paper presets of the polynomial laws (poly_pipd_paper, poly_mimd_paper: tcp_modules/laws.py) as BPF
congestion controls on a real bottleneck: the kernel's own TCP_INFO trace shows the window the law sets after
each loss — the connection's first loss halved, every later one the polynomial decrease, about 20 segments for
PIPD as the paper reports — and never the 2-segment floor Table 1's literal presets fall to.

Path: one sender -> router (htb 10 Mbit/s + pfifo 44 packets, wire-sized packets) -> one receiver. No added
delay, so a loss comes when about 46 packets are in flight (the queue plus a packet or two on the wire), where
PIPD's W - 0.1 W - (0.1 W)^2 is at its top, 20.25: the paper's minimum window of about 20.

The flows, the sampler and the cut of the kernel's BPF struct_ops fault are tests/support/lawflow.py's.
"""
from __future__ import annotations

import math
import os
import statistics

import pytest

from ccrig.commands import Commands
from ccrig.tcp_modules import laws
from ccrig.tcp_modules.manager import CcManager
from ccrig.tcp_modules.systems import available
from support.lawflow import LOSS, RECOVERY, bottleneck, bpf_skip_reason, growth_per_rtt, law_flow, loss_events

pytestmark = pytest.mark.host

PREFIX = f"ccP-{os.getpid()}"
SECONDS = 8
BUFFER = 44   # packets: the pipe is about 46, where PIPD's post-loss window peaks
TCP_INFINITE_SSTHRESH = 0x7fffffff   # include/net/tcp.h: a connection's ssthresh before its first loss


if (_why := bpf_skip_reason(PREFIX, "poly_pipd_paper")):
    pytestmark = [pytest.mark.host, pytest.mark.skip(reason=_why)]


@pytest.fixture(scope="module")
def path():
    with bottleneck(PREFIX, BUFFER) as bed:
        yield bed


@pytest.fixture(scope="module")
def ccs():
    m = CcManager(Commands(None), PREFIX, prefer="bpf")
    names = m.prepare(["poly_pipd_paper", "poly_mimd_paper"])
    yield names
    assert m.release() == []
    assert not set(names.values()) & set(available())


def law_band(law: laws.Poly, w: int, seen_loss: bool) -> tuple[float, float]:
    """The least and most the law's window after a loss can be when the trace saw the window at w: the 10 ms
    samples see it up to four segments low on a busy machine (a sample late by a round trip or two)."""
    values = [laws.loss_window_at(law, x, seen_loss) for x in range(w, w + 5)]
    return math.floor(min(values)), max(values)


def traced(path, names, preset):
    law = laws.PRESETS[preset]
    result, samples, runs = law_flow(path, names[preset], SECONDS)
    assert result["end"]["sender_tcp_congestion"] == names[preset]
    return law, samples, runs


def check_later_losses(law, runs) -> list[tuple[int, int, int | None]]:
    """Every loss after a run's first: ssthresh is the law's decrease from the window at the loss, and the
    window comes back to it once recovery is over. Returns those events."""
    later = [e for run in runs for e in loss_events(run)[1:]]
    assert len(later) >= 3, f"only {len(later)} losses after the first in {SECONDS} s"
    # the sampled W is a lower bound of the window at the loss: ssthresh is never below the law's decrease
    # from it, and for most losses at most the law's from W four segments on (a sample late by more, on a busy
    # machine, sees a window further short of the loss's)
    bands = [(w, ss, law_band(law, w, True)) for w, ss, _ in later]
    assert all(lo - 1 <= ss for _, ss, (lo, _) in bands), bands
    inside = [ss <= hi for _, ss, (_, hi) in bands]
    assert sum(inside) >= 0.8 * len(inside), bands
    back = [after - ss for _, ss, after in later if after is not None]
    assert back and abs(statistics.median(back)) <= 1, later
    return later


def ends_slow_start(run) -> bool:
    """Whether the trace's first loss is the one that ends slow start: the last sample before it still has the
    initial, infinite ssthresh (TCP_INFINITE_SSTHRESH)."""
    before = None
    for _, f in run:
        if f["ca_state"] in (RECOVERY, LOSS):
            return before is not None and before["snd_ssthresh"] >= TCP_INFINITE_SSTHRESH
        before = f
    return False


def test_pipd_paper_holds_about_20_segments_after_each_loss(path, ccs):
    law, samples, runs = traced(path, ccs, "poly_pipd_paper")
    later = check_later_losses(law, runs)
    # the paper's minimum of about 20, the law's own ceiling of 20.25, and never the 2-segment floor
    lows = [ss for _, ss, _ in later]
    assert all(10 <= ss <= 20 for ss in lows), later
    assert 17 <= statistics.median(lows) <= 20, later
    # the connection's first loss ends slow start and is halved, not the rule's decrease (which from slow
    # start's overshoot is near or at the floor); read only if the fault left the trace's start alone and the
    # trace saw slow start right up to that loss (a sampler late on a busy machine can miss a whole recovery,
    # and then the first loss it sees is the second, rightly the rule's: W 45, ssthresh 20 in one CI run)
    if runs and runs[0][0] is samples[0]:
        w, ss, _ = loss_events(runs[0])[0]
        if ends_slow_start(runs[0]):
            # the samples see slow start's window late, so W is a lower bound: ssthresh = floor(W_true / 2); and
            # above 20.25, which the decrease rule never gives (slow start overshoots the 46-packet pipe)
            assert ss >= w // 2 - 1 and ss > 20.25, (w, ss)
        else:
            assert law_band(law, w, True)[0] - 1 <= ss <= 20, (w, ss)   # a later loss: the rule's decrease
    # growth per RTT in congestion avoidance: 20/W + (20/W)^2, within a factor 3 as test_cc_bpf reads it
    g, w = growth_per_rtt(runs)
    want = law.increase(round(w))
    assert want / 3 <= g <= 3 * want, (g, w, want)


def test_mimd_paper_halves_and_grows_ten_percent_per_rtt(path, ccs):
    law, _, runs = traced(path, ccs, "poly_mimd_paper")
    later = check_later_losses(law, runs)
    assert all(ss >= 10 for _, ss, _ in later), later
    assert statistics.median(ss / w for w, ss, _ in later) == pytest.approx(0.5, abs=0.08), later
    g, w = growth_per_rtt(runs)
    assert w / 10 / 3 <= g <= 3 * w / 10, (g, w)
