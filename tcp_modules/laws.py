"""The two congestion-control families in floating point: the reference the fixed-point C core is checked
against (through vectors.json), and the presets named after the papers.

TCP(alpha, beta) (GAIMD; Mamatas & Tsaoussidis §2): per RTT without loss W += alpha; on a loss
W = max(beta * W, 2), beta being the fraction kept. The friendly form takes alpha = 4 (1 - beta^2) / 3 (Eq. 3).

Polynomial rules (Chandrasekaran & Wahida Banu, Eq. 2-4, Table 1), m = terms: per RTT without loss
W += sum_{n=1..m} (alpha / W)^(n k); on a loss W = max(W - sum_{n=1..m} (beta W)^(n l), 2), beta being the
fraction removed (their Eq. 1). per_ack applies the increase per acknowledged segment (their ns-2 text).

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
    acknowledged segment with per_ack. Also what a spec's `cc: {law: poly, ...}` becomes (spec.PolyCc)."""
    k: int
    l: int
    terms: int = 1
    alpha: float = 1.0
    beta: float = 0.5
    per_ack: bool = False
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
        return {"law": "poly", "k": self.k, "l": self.l, "terms": self.terms, "alpha": self.alpha,
                "beta": self.beta, "per_ack": self.per_ack}


Law = AlphaBeta | Poly

# The papers' parameterisations. TCP(alpha, beta): the three classes of §3.1 (standard New Reno, responsive,
# smooth); (1, 1/2) and (1.25, 1/4) satisfy Eq. 3 exactly, (0.31, 7/8) is Eq. 3's 0.3125 as the paper rounds it.
# Polynomial: every row of Table 1. The paper gives no numeric alpha or beta, so every preset uses alpha = 1,
# beta = 1/2, which makes poly_aimd exactly Reno (W += 1 per RTT, W -= W/2); poly_aiad2 is the PIPD model's
# "+2/-2" row. With beta = 1/2 the l = 1, m = 2 decrease (beta W + (beta W)^2) exceeds W - 2 for every W > 2,
# so poly_pipd and poly_aipd fall to the 2-segment floor at each loss: that is Table 1 taken literally.
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
}


@dataclass
class State:
    cwnd: int
    acc: float = 0.0   # segments x window

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
        return State(w, acc)
    d = math.floor(acc / w)
    acc -= d * w
    nw = w + d
    if nw > CAP:
        return State(int(CAP), 0.0)
    return State(int(nw), acc)


def on_loss(law: Law, s: State) -> State:
    """A loss indication (triple duplicate ACK): the decrease rule; the fraction stays in acc."""
    nw = law.loss_window(s.cwnd)
    segs = math.floor(nw)
    return State(segs, (nw - segs) * segs)


def on_rtt(law: Law, s: State) -> State:
    """One round trip without loss: a window's worth of single-segment ACKs."""
    for _ in range(s.cwnd):
        s = on_ack(law, s, 1)
    return s
