"""Polynomial (generalised binomial) rules (Chandrasekaran & Wahida Banu, Eq. 2-4, Table 1), m = terms: per RTT
without loss W += sum_{n=1..m} (alpha / W)^(n k); on a loss W = max(W - sum_{n=1..m} (beta W)^(n l), 2), beta being
the fraction removed (their Eq. 1). per_ack applies the increase per acknowledged segment (their ns-2 text).
halve_first is their ns-2 text's "upon the first congestion indication, the congestion window size is cut in
half and the session enters into the polynomial congestion control state": the connection's first loss gives
max(W / 2, 2), every later one the decrease rule. C law: poly.h.

Presets: every row of Table 1. The paper gives no numeric alpha or beta, so every such preset uses alpha = 1,
beta = 1/2, which makes poly_aimd exactly Reno (W += 1 per RTT, W -= W/2); poly_aiad2 is the PIPD model's
"+2/-2" row. With beta = 1/2 the l = 1, m = 2 decrease (beta W + (beta W)^2) exceeds W - 2 for every W > 2,
so poly_pipd and poly_aipd fall to the 2-segment floor at each loss: that is Table 1 taken literally.

The *_paper presets are the paper's two models with numbers chosen so that they behave as its §"Simulation
and analysis" reports (minimum windows of about 10 for MIMD and 20 for PIPD, PIPD the more aggressive), and
with its halving at the first loss (halve_first):
- poly_pipd_paper: k = 1, l = 1, two terms, alpha = 20, beta = 0.1. W - beta W - (beta W)^2 peaks at
  W = (1 - beta) / (2 beta^2) = 45 with (1 - beta)^2 / (4 beta^2) = 20.25, so after any loss the window is at
  most 20.25 (18-20.25 for losses at 30-60 segments, 16 at 25 or 65): the paper's minimum of about 20 is
  the law's own, nearly whatever the path. alpha = 20 makes the increase +2 per RTT at that minimum (the
  PIPD block's "+2"). Beyond W = 80 the decrease still reaches the floor: slow start's overshoot is halved.
- poly_mimd_paper: k = -1, l = 1, one term, alpha = 10, beta = 1/2: grows 10 % per RTT (+1 at W = 10, as
  Reno; alpha = 1 doubles every RTT, slow start forever) and halves at a loss like poly_mimd. Its minimum,
  W/2, is the path's: about 10 where the six flows' drop-tail pipe (BDP + buffer) holds about 110 packets.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from ._family import CAP, MIN_CWND, REAL_MAX, Family, LawBase, param

EXP_MIN, EXP_MAX = -3, 3     # range of k and l (poly.h's CCRIG_EXP_MAX)
TERMS_MAX = 4                # poly.h's CCRIG_TERMS_MAX


@dataclass(frozen=True)
class Poly(LawBase):
    """Polynomial rules: exponents k and l, `terms` terms, beta the fraction removed on a loss, the increase per
    acknowledged segment with per_ack, the first loss a halving with halve_first. Also what a spec's
    `cc: {law: poly, ...}` becomes."""
    k: int = param("int", lo=EXP_MIN, hi=EXP_MAX, doc="increase exponent")
    l: int = param("int", lo=EXP_MIN, hi=EXP_MAX, doc="decrease exponent")
    terms: int = param("int", 1, lo=1, hi=TERMS_MAX, doc="number of polynomial terms m")
    alpha: float = param("real", 1.0, lo=0, hi=REAL_MAX, lo_open=True, doc="alpha of the increase (alpha/W)^k")
    beta: float = param("real", 0.5, lo=0, hi=1, lo_open=True, hi_open=True,
                        doc="beta of the decrease (beta W)^l",
                        meaning=" (the fraction of the window removed, as (beta W)^l)")
    per_ack: bool = param("flag", False, doc="1 adds the increase per acknowledged segment instead of per RTT")
    # halve_first only in params() when set: every law that existed before the option keeps its parameters, and
    # so its generated BPF name, records and vectors, unchanged
    halve_first: bool = param("flag", False, when_set=True,
                              doc="1 halves the window at a connection's first loss, the decrease rule after")
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
        w = max(w, 1)
        if self.k < 0:
            # (alpha / W)^k is (W / alpha)^-k, divided that way round as poly.h does: 1 / (1 / 117) is not 117 in
            # floating point, and a window one ulp short of a whole segment is a segment short after the floor
            return self._sum(w / self.alpha, -self.k, self.terms)
        return self._sum(self.alpha / w, self.k, self.terms)

    def decrease(self, w: int) -> float:
        return self._sum(min(self.beta * w, CAP), self.l, self.terms)

    def loss_window(self, w: int) -> float:
        return max(w - self.decrease(w), MIN_CWND)


def _sample(rng: random.Random) -> Poly:
    """Every exponent, 1..4 terms, a fifth per ACK, a quarter with the first-loss halving."""
    return Poly(k=rng.randint(EXP_MIN, EXP_MAX), l=rng.randint(EXP_MIN, EXP_MAX), terms=rng.randint(1, TERMS_MAX),
                alpha=round(10 ** rng.uniform(-1.3, 1.3), 6), beta=round(rng.uniform(0.02, 0.98), 6),
                per_ack=rng.random() < 0.2, halve_first=rng.random() < 0.25)


FAMILY = Family(
    law=Poly, letter="p", code=2, tunable="poly_param",
    summary="Polynomial congestion control",
    presets={
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
    },
    sample=_sample, n_random=50,
    # Reno's rule per ACK, and Table 1's PIPD row as it stands with the paper's first-loss halving
    vector_cases={"poly_aimd_per_ack": Poly(0, 1, 1, per_ack=True),
                  "poly_pipd_halve_first": dataclasses.replace(Poly(1, 1, 2), halve_first=True)})
