"""Throughput equations: GAIMD (reconstructed Eq. 1 of study 001), Padhye, Mathis."""
import itertools
import math

import pytest

from ccrig.analysis import throughput as tp
from ccrig.errors import InputError

GRID = list(itertools.product((1e-4, 0.003, 0.02, 0.1, 0.3, 1.0), (0.001, 0.05, 0.3), (0.2, 1.0, 3.0), (1, 2)))


@pytest.mark.parametrize("p,rtt,t0,b", GRID)
def test_gaimd_with_tcp_parameters_is_padhye(p, rtt, t0, b):
    assert tp.gaimd(p, rtt, t0, b, alpha=1.0, beta=0.5) == pytest.approx(tp.padhye(p, rtt, t0, b), rel=1e-12)


def test_padhye_by_hand():
    # p = 0.01, RTT = 0.1, T0 = 1, b = 1: 0.1·√(0.02/3) + min(1, 3√(0.03/8))·0.01·(1 + 0.0032)
    td = 0.1 * math.sqrt(0.02 / 3)
    to = 3 * math.sqrt(0.03 / 8) * 0.01 * 1.0032
    assert tp.padhye(0.01, 0.1, 1.0) == pytest.approx(1 / (td + to), rel=1e-12)
    assert tp.padhye(0.01, 0.1, 1.0, wmax=5) == pytest.approx(50.0)


def test_tcp_friendly_alpha():
    assert tp.tcp_friendly_alpha(0.5) == pytest.approx(1.0)
    assert tp.tcp_friendly_alpha(7 / 8) == pytest.approx(0.3125)  # the seed's "α = 0.31"
    assert tp.tcp_friendly_alpha(0.25) == pytest.approx(1.25)  # the seed's responsive TCP(1.25, 0.25)


@pytest.mark.parametrize("beta", (0.25, 0.5, 0.7, 7 / 8))
def test_friendly_alpha_matches_tcp_timeout_term(beta):
    """With α = 4(1−β²)/3 the timeout term of Eq. 1 is TCP's for every β (RTT negligible)."""
    a = tp.tcp_friendly_alpha(beta)
    for p in (0.001, 0.05, 0.5):
        assert tp.gaimd(p, 1e-15, 1.0, 1, a, beta) == pytest.approx(tp.padhye(p, 1e-15, 1.0), rel=1e-9)


def test_gaimd_root_p_and_parameter_trends():
    # without timeouts the rate follows 1/√p and 1/RTT, and √(α(1+β)/(1−β))
    t = tp.gaimd(0.01, 0.1, 0.0, 1, 0.31, 0.875)
    assert tp.gaimd(0.04, 0.1, 0.0, 1, 0.31, 0.875) == pytest.approx(t / 2)
    assert tp.gaimd(0.01, 0.2, 0.0, 1, 0.31, 0.875) == pytest.approx(t / 2)
    assert t == pytest.approx(math.sqrt(0.31 * 1.875 / (2 * 0.125 * 0.01)) / 0.1)


def test_mathis():
    assert tp.mathis(0.01, 0.1, 1448) == pytest.approx(math.sqrt(1.5) * 1448 / (0.1 * 0.1))
    assert tp.mathis(0.01, 0.1, c=1.0) == pytest.approx(100.0)
    # Padhye without timeouts and b = 1 is Mathis with c = √(3/2)
    assert tp.padhye(0.002, 0.05, 0.0) == pytest.approx(tp.mathis(0.002, 0.05), rel=1e-12)


@pytest.mark.parametrize("call,field", [
    (lambda: tp.gaimd(0.0, 0.1, 1.0), "p"), (lambda: tp.gaimd(1.5, 0.1, 1.0), "p"),
    (lambda: tp.gaimd(0.1, -1, 1.0), "rtt"), (lambda: tp.gaimd(0.1, 0.1, -1.0), "t0"),
    (lambda: tp.gaimd(0.1, 0.1, 1.0, beta=1.0), "beta"), (lambda: tp.gaimd(0.1, 0.1, 1.0, alpha=0), "alpha"),
    (lambda: tp.padhye(0.1, 0.1, 1.0, b=0.5), "b"), (lambda: tp.mathis(0.1, 0.1, segment=0), "segment"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(InputError, match=rf"^{field}: got .*; expected "):
        call()


def test_loss_event_rate_counts_one_event_per_window_with_a_loss():
    # by hand: W = 10, p = 0.01: 1 - 0.99^10 = 0.0956 of the windows hold a loss, one event per 10 packets each
    assert tp.loss_event_rate(0.01, 10) == pytest.approx((1 - 0.99 ** 10) / 10, rel=1e-12)
    assert tp.loss_event_rate(0.01, 10) < 0.01   # two losses in one window are one event
    assert tp.loss_event_rate(0.3, 0.5) == 0.3 and tp.loss_event_rate(0.0, 10) == 0.0
    # against counting: independent losses in windows of 8 packets, an event per window that lost any
    import random
    rng, p, w, windows = random.Random(1), 0.05, 8, 40000
    events = sum(any(rng.random() < p for _ in range(w)) for _ in range(windows))
    assert tp.loss_event_rate(p, w) == pytest.approx(events / (windows * w), rel=0.03)


def test_gaimd_bps_is_eq1_at_the_flows_own_loss_event_rate_and_rtt():
    # 1 % segment loss, 12 packets a 0.4 s RTT: p = loss_event_rate(0.01, 12), T0 = 0.6 s, b = 1
    thr = 12 * 1448 * 8 / 0.4
    want = tp.gaimd(tp.loss_event_rate(0.01, 12), 0.4, 0.6, 1.0, 1.25, 0.25) * 1448 * 8
    assert tp.gaimd_bps(0.01, thr, 0.4, 1.25, 0.25) == pytest.approx(want, rel=1e-12)
    assert tp.gaimd_bps(0.0, thr, 0.4, 1.0, 0.5) is None   # no loss: Eq. 1 says nothing
    with pytest.raises(InputError, match="loss"):
        tp.loss_event_rate(1.5, 3)


def test_eq5_per_flow_against_hand_computed_values():
    # 10 of 1000 segments lost: p = 0.01, √p = 0.1; R = 50 ms; s = 1448 bytes = 11584 bits.
    # c = 1: 11584 / (0.05 · 0.1) = 2 316 800 bit/s; the default c = √(3/2): 2 316 800 · 1.2247449 = 2 837 488.9
    assert tp.mathis_flow_bps(10, 1000, 0.05, c=1.0) == pytest.approx(2_316_800.0, rel=1e-12)
    assert tp.mathis_flow_bps(10, 1000, 0.05) == pytest.approx(2_837_488.9, rel=1e-7)
    # four times the loss halves it, twice the RTT halves it (the root-p law)
    assert tp.mathis_flow_bps(40, 1000, 0.05, c=1.0) == pytest.approx(1_158_400.0, rel=1e-12)
    assert tp.mathis_flow_bps(10, 1000, 0.10, c=1.0) == pytest.approx(1_158_400.0, rel=1e-12)
    # 1 of 4 segments with a 536-byte MSS at 0.2 s: 4288 bits / (0.2 · 0.5) = 42 880 bit/s
    assert tp.mathis_flow_bps(1, 4, 0.2, mss=536, c=1.0) == pytest.approx(42_880.0, rel=1e-12)
    assert tp.mathis_flow_bps(0, 1000, 0.05) is None   # no loss: Eq. 5 is unbounded, says nothing
    assert tp.mathis_flow_bps(0, 0, 0.05) is None
    with pytest.raises(InputError, match="lost"):
        tp.mathis_flow_bps(5, 4, 0.05)
    with pytest.raises(InputError, match="rtt"):
        tp.mathis_flow_bps(1, 4, 0.0)
