"""A point whose repetitions all read the same value: what its mean may be.

Student's t over n identical values has width 0 and covers nothing. Keshav's study showed the cost (runs A and B,
2026-12-01): a Telnet delivers every message in most repetitions and loses half of them in about one in four, so
three zeros decided "no-difference" in one run, one non-zero repetition left it undecided in the other.

The repetition is the unit. Let p be the share of the repetitions' distribution off the value v that all n read.
The common value was not named before the draws, so the chance that n draws agree on some value of mass 1 - p
is sum over values of mass^n <= (1 - p)^(n-1): at level alpha, p <= 1 - alpha^(1/(n-1)) (exact and
distribution-free; the rule of three's 1 - alpha^(1/n) would need v named in advance). That share may lie
anywhere in the range one repetition's value can take (the metric's `bounds`, analysis/metric_table.py), so the
mean lies within [v - p (v - low), v + p (high - v)]; an unbounded side is infinitely far. Both ends fail only
together (p above its bound), so the interval covers at level 1 - alpha. analysis/sequential.judge adds it to the
t interval of the parts with a spread, Bonferroni over the parts.
"""
from __future__ import annotations

import math

from .samples import Part, fmt


def deviating(n: int, alpha: float) -> float:
    """The most of the repetitions' distribution that may lie off the value all n (>= 2) of them read, at level
    alpha (n = 3 at alpha 0.025: 0.84; n = 30: 0.12)."""
    return 1.0 - alpha ** (1.0 / (n - 1))


def interval(p: Part, alpha: float) -> tuple[float, float]:
    """How far coef x the point's mean may lie below and above coef x the value all its repetitions read, at
    level 1 - alpha (inf: the quantity has no bound on that side)."""
    lo, hi = p.bounds
    d = deviating(p.n, alpha)
    below = math.inf if lo is None else d * max(0.0, p.value - lo)
    above = math.inf if hi is None else d * max(0.0, hi - p.value)
    c = abs(p.coef)
    return (c * below, c * above) if p.coef >= 0 else (c * above, c * below)


def widths(parts: list[Part], alpha: float) -> tuple[float, float]:
    """The sum of the points' interval(p, alpha): how far below and above the estimate its flat points reach."""
    ends = [interval(p, alpha) for p in parts]
    return sum(d for d, _ in ends), sum(u for _, u in ends)


def needs(parts: list[Part], room: float, alpha: float, cap: int) -> tuple[dict[str, int], str]:
    """The flat points' more repetitions (more_for) and what the basis says of them."""
    out, said = {}, ""
    for p in parts:
        more = more_for(p, room, alpha, cap)
        if more:
            out[p.key] = more
            said += f"; {more} more at {p.key} narrow its bound to half the margin if they agree"
        elif None in p.bounds:
            said += f"; {p.key}'s quantity has no bound on one side: no number of agreeing repetitions bounds " \
                    f"its mean there"
        else:
            said += f"; more than {cap} repetitions at {p.key} would be needed to bound it"
    return out, said


def more_for(p: Part, room: float, alpha: float, cap: int) -> int:
    """More repetitions after which the point's bound, if they still agree, spans at most `room` of coef x the
    value's range: a schedule from the range and the margin alone, never from a difference. 0 when none would
    (an unbounded side, no room, or more than `cap`)."""
    lo, hi = p.bounds
    if lo is None or hi is None or room <= 0 or p.coef == 0 or hi <= lo:
        return 0
    share = room / (abs(p.coef) * (hi - lo))
    if share >= 1:
        return 0
    n = 1 + math.ceil(math.log(alpha) / math.log1p(-share))
    return n - p.n if p.n < n <= p.n + cap else 0


def text(p: Part, alpha: float) -> str:
    """What a claim's basis says of the point."""
    lo = "-inf" if p.bounds[0] is None else fmt(p.bounds[0])
    hi = "inf" if p.bounds[1] is None else fmt(p.bounds[1])
    return (f"{p.key}'s {p.n} repetitions all read {fmt(p.value)}: up to {100 * deviating(p.n, alpha):.3g} % of "
            f"them may lie elsewhere in [{lo}, {hi}] (exact binomial bound, the repetition as the unit)")
