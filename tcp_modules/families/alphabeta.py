"""TCP(alpha, beta), the GAIMD family (Yang & Lam; Mamatas & Tsaoussidis §2): per RTT without loss W += alpha; on
a loss W = max(beta * W, 2), beta being the fraction kept. The friendly form takes alpha = 4 (1 - beta^2) / 3
(their Eq. 3): `friendly: true` in a spec derives alpha from beta. C law: alphabeta.h.

Presets: the three classes of §3.1 (standard New Reno, responsive, smooth); (1, 1/2) and (1.25, 1/4) satisfy
Eq. 3 exactly, (0.31, 7/8) is Eq. 3's 0.3125 as the paper rounds it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from ._family import MIN_CWND, REAL_MAX, Family, FieldError, LawBase, param


def friendly_alpha(beta: float) -> float:
    """Eq. 3 of the TCP(alpha, beta) study: the alpha that makes TCP(alpha, beta) as fast as TCP(1, 1/2)."""
    return 4.0 * (1.0 - beta * beta) / 3.0


@dataclass(frozen=True)
class AlphaBeta(LawBase):
    """alpha segments per RTT, beta the fraction of the window kept on a loss; `friendly` (spec only, not a
    parameter) says alpha was derived from beta."""
    law: str = field(default="alphabeta", init=False)   # first: a resolved spec shows the law before its values
    alpha: float = param("real", lo=0, hi=REAL_MAX, lo_open=True, doc="increase per RTT in segments")
    beta: float = param("real", lo=0, hi=1, lo_open=True, hi_open=True,
                        doc="fraction of the window kept on a loss",
                        meaning=" (the fraction of the window kept on a loss)")
    friendly: bool = field(default=False, compare=False)

    def increase(self, w: int) -> float:
        return self.alpha

    def loss_window(self, w: int) -> float:
        return max(self.beta * w, MIN_CWND)


def _prepare(value: dict, check) -> dict:
    """friendly: true derives alpha from beta (an alpha given beside it must be that one); without it alpha
    is required."""
    friendly = value.get("friendly", False)
    if not isinstance(friendly, bool):
        raise FieldError("friendly", friendly, "true or false")
    if friendly:
        alpha = friendly_alpha(check("beta"))
        given = value.get("alpha", alpha)
        if isinstance(given, bool) or not isinstance(given, (int, float)) or abs(given - alpha) > 1e-9:
            raise FieldError("alpha", given, f"no alpha with friendly: true (it is derived: 4(1-beta^2)/3 = "
                                             f"{alpha:g})")
        return {**value, "alpha": alpha}
    if "alpha" not in value:
        raise FieldError("alpha", None, "a number > 0, or friendly: true to derive it from beta")
    return value


def _sample(rng: random.Random) -> AlphaBeta:
    return AlphaBeta(round(10 ** rng.uniform(-1.3, 1.3), 6), round(rng.uniform(0.02, 0.98), 6))


FAMILY = Family(
    law=AlphaBeta, letter="a", code=1, tunable="ab_param",
    summary="TCP(alpha, beta) congestion control",
    presets={
        "ab_standard": AlphaBeta(1.0, 0.5),
        "ab_responsive": AlphaBeta(1.25, 0.25),
        "ab_smooth": AlphaBeta(0.31, 0.875),
    },
    sample=_sample, n_random=20, prepare=_prepare)
