"""Steady-state TCP throughput equations: GAIMD (Yang–Lam), Padhye's standard-TCP equation, Mathis' root-p law.

All return packets per second (multiply by the segment size for bytes); p is the loss event rate (0 < p ≤ 1),
rtt and t0 are in seconds, b is the number of packets acknowledged by one ACK.

GAIMD, study 001 Eq. 1 (Yang & Lam, "General AIMD congestion control", ICNP 2000):

    T_{α,β}(p, RTT, T0, b) = 1 / ( RTT·√( 2b(1−β) / (α(1+β)) · p )
                                   + T0 · min(1, 3·√( (1−β²)b / (2α) · p )) · p · (1 + 32p²) )

The seed's typesetting is damaged: it prints "RTT √(2b(1−β)/(α(1+β))) p" and "3√((1−β²)b/(2α)) p", which
puts p outside both radicals (throughput would then fall as 1/p, not 1/√p). It is reconstructed with p under
both radicals because (i) that is the structure of Padhye et al.'s equation, which the seed says GAIMD extends,
and with α = 1, β = 1/2 the two coefficients become exactly Padhye's 2b/3 and 3b/8; (ii) the first term then is
the mean-value AIMD derivation (an epoch of (1−β)W/α RTTs carries (1−β²)W²/(2α) packets = 1/p). The unit tests
check (i) to 1e-12 for every p, RTT, T0, b.

The TCP-friendly relation α = 4(1−β²)/3 (study 001 Eq. 3) is kept as printed. It makes Eq. 1's timeout term
equal TCP's for every β; the first (triple-duplicate) term matches TCP's exactly only at β = 1/2 (for that term
alone the relation would be α = 3(1−β)/(1+β)), which is why the seed calls Eq. 2 "a rough guide".

Padhye et al. (SIGCOMM 1998) approximate model, i.e. GAIMD with α = 1, β = 1/2:
    B(p) = 1 / ( RTT·√(2bp/3) + T0·min(1, 3·√(3bp/8))·p·(1 + 32p²) )
(optionally capped by the receiver window: min(Wmax/RTT, B(p))).

Mathis et al. / study 002 Eq. 5: λ = c·s / (R·√p). The seed omits c's value ("commonly approximated as."); the
usual constant is √(3/2) ≈ 1.22 for one ACK per packet (√(3/(2b)) with b packets per ACK), the default here.

Eq. 1's p is a loss *event* rate: the window is cut once however many of its packets were lost. TCP_INFO counts
lost segments, not events, so `loss_event_rate` turns a measured segment loss ratio into events per packet for
independent (Bernoulli) losses: a window of W packets holds at least one loss with chance 1 − (1 − p)^W, one event
per such window, so (1 − (1 − p)^W) / W events per packet. `gaimd_bps` evaluates Eq. 1 for one flow from what
one repetition measured (the loss ratio on its path, its throughput and smoothed RTT) with Linux's timeout:
RTO = SRTT + at least tcp_rto_min (200 ms), so T0 = RTT + 0.2 s; b = 1 because Linux grows the window per segment
acknowledged, not per ACK, so a delayed ACK does not slow the increase.
"""
from __future__ import annotations

import math

from ccrig.errors import field_error

MATHIS_C = math.sqrt(1.5)


def _check(p: float, rtt: float, t0: float | None = None, b: float | None = None) -> None:
    if not (0.0 < p <= 1.0):
        raise field_error("p", p, "a loss event rate in (0, 1]")
    if not (rtt > 0 and math.isfinite(rtt)):
        raise field_error("rtt", rtt, "a positive round-trip time in seconds")
    if t0 is not None and not (t0 >= 0 and math.isfinite(t0)):
        raise field_error("t0", t0, "a retransmission timeout ≥ 0 in seconds")
    if b is not None and not (b >= 1):
        raise field_error("b", b, "packets acknowledged per ACK, ≥ 1")


def _check_ab(alpha: float, beta: float) -> None:
    if not (alpha > 0 and math.isfinite(alpha)):
        raise field_error("alpha", alpha, "a positive additive increase (packets per RTT)")
    if not (0.0 < beta < 1.0):
        raise field_error("beta", beta, "a multiplicative decrease factor in (0, 1)")


def gaimd(p: float, rtt: float, t0: float, b: float = 1.0, alpha: float = 1.0, beta: float = 0.5) -> float:
    """GAIMD sending rate T_{α,β}(p, RTT, T0, b) in packets per second (study 001, Eq. 1, reconstructed)."""
    _check(p, rtt, t0, b)
    _check_ab(alpha, beta)
    td = rtt * math.sqrt(2.0 * b * (1.0 - beta) / (alpha * (1.0 + beta)) * p)
    to = t0 * min(1.0, 3.0 * math.sqrt((1.0 - beta * beta) * b / (2.0 * alpha) * p)) * p * (1.0 + 32.0 * p * p)
    return 1.0 / (td + to)


def tcp_friendly_alpha(beta: float) -> float:
    """α = 4(1 − β²)/3 (study 001, Eq. 3): β = 7/8 gives α ≈ 0.31, β = 1/2 gives 1."""
    _check_ab(1.0, beta)
    return 4.0 * (1.0 - beta * beta) / 3.0


def padhye(p: float, rtt: float, t0: float, b: float = 1.0, wmax: float | None = None) -> float:
    """Padhye et al.'s approximate standard-TCP throughput in packets per second (capped by Wmax/RTT if given)."""
    _check(p, rtt, t0, b)
    rate = 1.0 / (rtt * math.sqrt(2.0 * b * p / 3.0)
                  + t0 * min(1.0, 3.0 * math.sqrt(3.0 * b * p / 8.0)) * p * (1.0 + 32.0 * p * p))
    if wmax is not None:
        if not wmax > 0:
            raise field_error("wmax", wmax, "a positive receiver window in packets")
        rate = min(wmax / rtt, rate)
    return rate


def mathis(p: float, rtt: float, segment: float = 1.0, c: float = MATHIS_C) -> float:
    """Mathis' root-p law c·s/(R·√p): packets per second with segment = 1, else in the unit of `segment`."""
    _check(p, rtt)
    if not (segment > 0):
        raise field_error("segment", segment, "a positive segment size")
    if not (c > 0):
        raise field_error("c", c, "a positive constant (√(3/2) ≈ 1.22 is usual)")
    return c * segment / (rtt * math.sqrt(p))


LINUX_RTO_MIN_S = 0.2   # tcp_rto_min: Linux's RTO is SRTT plus at least this (the rttvar term's floor)


def loss_event_rate(loss: float, window: float) -> float:
    """Loss events per packet from a segment loss ratio and the window in packets, losses independent (see the
    module's docstring); a window under one packet makes every loss an event of its own."""
    if not (0.0 <= loss <= 1.0):
        raise field_error("loss", loss, "a segment loss ratio in [0, 1]")
    if not (window >= 0 and math.isfinite(window)):
        raise field_error("window", window, "a window ≥ 0 in packets")
    if window <= 1.0 or loss == 0.0:
        return loss
    return (1.0 - (1.0 - loss) ** window) / window


def gaimd_bps(loss: float, throughput_bps: float, rtt: float, alpha: float, beta: float, mss: int = 1448,
              rto_min: float = LINUX_RTO_MIN_S) -> float | None:
    """Eq. 1's sending rate in bit/s of payload for one flow at a measured segment loss ratio on its path, its
    throughput (payload sent, bit/s) and smoothed RTT; None where Eq. 1 says nothing (no loss: the flow was not
    loss-limited)."""
    if loss <= 0.0:
        return None
    window = throughput_bps * rtt / (8.0 * mss)
    p = loss_event_rate(loss, window)
    return gaimd(p, rtt, rtt + rto_min, 1.0, alpha, beta) * mss * 8.0


def mathis_flow_bps(lost: float, sent: float, rtt: float, mss: int = 1448, c: float = MATHIS_C) -> float | None:
    """Study 002's Eq. 5, λ = c·s/(R·√p), in bit/s of payload for one flow of one repetition: p its own segments
    lost over its segments sent (the whole repetition's counts: the packet loss rate of that connection, as a
    trace gives it), R its mean smoothed RTT (queueing included: the round trip its window of W = c/√p segments
    takes), s the MSS. None where Eq. 5 says nothing: a flow that sent nothing, or lost nothing (λ unbounded)."""
    if not (sent >= 0 and math.isfinite(sent)):
        raise field_error("sent", sent, "a count of segments sent ≥ 0")
    if not (0 <= lost <= sent):
        raise field_error("lost", lost, f"a count of segments lost in [0, sent = {sent:g}]")
    if lost == 0:
        return None
    return mathis(lost / sent, rtt, 8.0 * mss, c)
