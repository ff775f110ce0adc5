"""The two congestion-control families in floating point: the reference the fixed-point C core is checked
against (through vectors.json), and the presets named after the papers.

TCP(alpha, beta) (GAIMD; Mamatas & Tsaoussidis §2): per RTT without loss W += alpha; on a loss
W = max(beta * W, 2), beta being the fraction kept. The friendly form takes alpha = 4 (1 - beta^2) / 3 (Eq. 3).

Polynomial rules (Chandrasekaran & Wahida Banu, Eq. 2-4, Table 1), m = terms: per RTT without loss
W += sum_{n=1..m} (alpha / W)^(n k); on a loss W = max(W - sum_{n=1..m} (beta W)^(n l), 2), beta being the
fraction removed (their Eq. 1). per_ack applies the increase per acknowledged segment (their ns-2 text).
halve_first is their ns-2 text's "upon the first congestion indication, the congestion window size is cut in
half and the session enters into the polynomial congestion control state": the connection's first loss gives
max(W / 2, 2), every later one the decrease rule (State.seen_loss says which).

The state is what a TCP sender has: an integer window `cwnd` and an accumulator `acc` of increase earned
but not yet a whole segment, in units of segments x window (Reno's snd_cwnd_cnt, generalised): W acked
segments add I(W); acc >= cwnd adds a segment. A loss keeps the new window's fraction in acc. See
include/ccrig_law.h for the same text above the C code. Everything saturates at CAP segments.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

FP = 20                      # fractional bits of the C core
ONE = 1 << FP
CAP = float(1 << 24)         # saturation, in segments
MIN_CWND = 2
EXP_MIN, EXP_MAX = -3, 3     # range of k and l
TERMS_MAX = 4
ALPHA_MAX = 1000.0


def quantize(x: float) -> int:
    """A parameter as the C core holds it: Q20, rounded to nearest."""
    return int(round(x * ONE))


def friendly_alpha(beta: float) -> float:
    """Eq. 3 of the TCP(alpha, beta) study: the alpha that makes TCP(alpha, beta) as fast as TCP(1, 1/2)."""
    return 4.0 * (1.0 - beta * beta) / 3.0


@dataclass(frozen=True)
class AlphaBeta:
    alpha: float
    beta: float
    law: str = field(default="alphabeta", init=False)

    def increase(self, w: int) -> float:
        return self.alpha

    def loss_window(self, w: int) -> float:
        return max(self.beta * w, MIN_CWND)

    @property
    def per_ack(self) -> bool:
        return False

    def params(self) -> dict:
        return {"law": "alphabeta", "alpha": self.alpha, "beta": self.beta}


@dataclass(frozen=True)
class Poly:
    """Polynomial rules: exponents k and l, `terms` terms, beta the fraction removed on a loss, the increase per
    acknowledged segment with per_ack, the first loss a halving with halve_first. Also what a spec's
    `cc: {law: poly, ...}` becomes (spec.PolyCc)."""
    k: int
    l: int
    terms: int = 1
    alpha: float = 1.0
    beta: float = 0.5
    per_ack: bool = False
    halve_first: bool = False
    law: str = field(default="poly", init=False)

    @staticmethod
    def _sum(base: float, e: int, m: int) -> float:
        if e < 0:
            base = CAP if base == 0 else 1.0 / base
            e = -e
        t = min(base ** e, CAP)
        s, p = 0.0, 1.0
        for _ in range(m):
            p = min(p * t, CAP)
            s = min(s + p, CAP)
        return s

    def increase(self, w: int) -> float:
        return self._sum(self.alpha / max(w, 1), self.k, self.terms)

    def decrease(self, w: int) -> float:
        return self._sum(min(self.beta * w, CAP), self.l, self.terms)

    def loss_window(self, w: int) -> float:
        return max(w - self.decrease(w), MIN_CWND)

    def params(self) -> dict:
        # halve_first only when set: every law that existed before the option keeps its parameters, and so
        # its generated BPF name, records and vectors, unchanged
        return {"law": "poly", "k": self.k, "l": self.l, "terms": self.terms, "alpha": self.alpha,
                "beta": self.beta, "per_ack": self.per_ack, **({"halve_first": True} if self.halve_first else {})}


Law = AlphaBeta | Poly

# The papers' parameterisations. TCP(alpha, beta): the three classes of §3.1 (standard New Reno, responsive,
# smooth); (1, 1/2) and (1.25, 1/4) satisfy Eq. 3 exactly, (0.31, 7/8) is Eq. 3's 0.3125 as the paper rounds it.
# Polynomial: every row of Table 1. The paper gives no numeric alpha or beta, so every preset uses alpha = 1,
# beta = 1/2, which makes poly_aimd exactly Reno (W += 1 per RTT, W -= W/2); poly_aiad2 is the PIPD model's
# "+2/-2" row. With beta = 1/2 the l = 1, m = 2 decrease (beta W + (beta W)^2) exceeds W - 2 for every W > 2,
# so poly_pipd and poly_aipd fall to the 2-segment floor at each loss: that is Table 1 taken literally.
#
# The *_paper presets are the paper's two models with numbers chosen so that they behave as its §"Simulation
# and analysis" reports (minimum windows of about 10 for MIMD and 20 for PIPD, PIPD the more aggressive), and
# with its halving at the first loss (halve_first):
# - poly_pipd_paper: k = 1, l = 1, two terms, alpha = 20, beta = 0.1. W - beta W - (beta W)^2 peaks at
#   W = (1 - beta) / (2 beta^2) = 45 with (1 - beta)^2 / (4 beta^2) = 20.25, so after any loss the window is at
#   most 20.25 (18-20.25 for losses at 30-60 segments, 16 at 25 or 65): the paper's minimum of about 20 is
#   the law's own, nearly whatever the path. alpha = 20 makes the increase +2 per RTT at that minimum (the
#   PIPD block's "+2"). Beyond W = 80 the decrease still reaches the floor: slow start's overshoot is halved.
# - poly_mimd_paper: k = -1, l = 1, one term, alpha = 10, beta = 1/2: grows 10 % per RTT (+1 at W = 10, as
#   Reno; alpha = 1 doubles every RTT, slow start forever) and halves at a loss like poly_mimd. Its minimum,
#   W/2, is the path's: about 10 where the six flows' drop-tail pipe (BDP + buffer) holds about 110 packets.
PRESETS: dict[str, Law] = {
    "ab_standard": AlphaBeta(1.0, 0.5),
    "ab_responsive": AlphaBeta(1.25, 0.25),
    "ab_smooth": AlphaBeta(0.31, 0.875),
    "poly_aimd": Poly(k=0, l=1, terms=1),
    "poly_mimd": Poly(k=-1, l=1, terms=1),
    "poly_miad": Poly(k=-1, l=0, terms=1),
    "poly_aiad": Poly(k=0, l=0, terms=1),
    "poly_aiad2": Poly(k=0, l=0, terms=2),
    "poly_pipd": Poly(k=1, l=1, terms=2),
    "poly_aipd": Poly(k=0, l=1, terms=2),
    "poly_piad": Poly(k=1, l=0, terms=2),
    "poly_mimd_paper": Poly(k=-1, l=1, terms=1, alpha=10.0, beta=0.5, halve_first=True),
    "poly_pipd_paper": Poly(k=1, l=1, terms=2, alpha=20.0, beta=0.1, halve_first=True),
}


@dataclass
class State:
    cwnd: int
    acc: float = 0.0   # segments x window
    seen_loss: bool = False   # the connection has had a loss indication (a halve_first law's first is spent)

    @property
    def window(self) -> float:
        """The real-valued window: cwnd plus the earned fraction of a segment."""
        return self.cwnd + self.acc / self.cwnd


def on_ack(law: Law, s: State, acked: int) -> State:
    """acked segments acknowledged in congestion avoidance."""
    w = max(s.cwnd, 1)
    add = law.increase(w) * (w if law.per_ack else 1) * acked
    acc = s.acc + add
    if acc < w:
        return State(w, acc, s.seen_loss)
    d = math.floor(acc / w)
    acc -= d * w
    nw = w + d
    if nw > CAP:
        return State(int(CAP), 0.0, s.seen_loss)
    return State(int(nw), acc, s.seen_loss)


def loss_window_at(law: Law, w: int, seen_loss: bool) -> float:
    """The window after a loss at w: a halve_first law's first loss halves it, every other loss is the law's."""
    if getattr(law, "halve_first", False) and not seen_loss:
        return max(w / 2, MIN_CWND)
    return law.loss_window(w)


def on_loss(law: Law, s: State) -> State:
    """A loss indication (triple duplicate ACK, or a timeout's ssthresh): the decrease rule (the halving for a
    halve_first law's first); the fraction stays in acc."""
    nw = loss_window_at(law, s.cwnd, s.seen_loss)
    segs = math.floor(nw)
    return State(segs, (nw - segs) * segs, True)


def on_rtt(law: Law, s: State) -> State:
    """One round trip without loss: a window's worth of single-segment ACKs."""
    for _ in range(s.cwnd):
        s = on_ack(law, s, 1)
    return s
