"""A point whose repetitions each read 1 or 0 (a quantity with `exceeds`): the share of them that read 1.

Keshav's "no dropped packets" is the case: most repetitions drop nothing, so their loss reads 0 at every point,
and a bound on the mean loss can only come from the range a loss may take (analysis/flat.py: [0, 1], more than
1000 repetitions to bound it near 0). Asked instead how often a repetition drops anything, each repetition is a
Bernoulli trial, and the share of them has an exact interval: Clopper-Pearson's, from the binomial itself, at
any n and whatever the repetitions read (the t interval over 0s and 1s under-covers near 0 and 1, and has width
0 when they agree). Both values are named before the draws (0 and 1), so n agreeing repetitions bound the share
at 1 - (alpha / 2)^(1/n), where flat.py's bound for a value found in the data needs n - 1.

analysis/sequential.judge gives each such point this interval, at its share of the look's alpha (Bonferroni
with the other points), and adds it to the rest as flat points are added.
"""
from __future__ import annotations

from functools import lru_cache

from .samples import Part, fmt


@lru_cache(maxsize=512)
def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """The exact two-sided interval, level 1 - alpha, of a share seen k times in n trials."""
    from scipy.stats import beta   # lazy: scipy takes a while to import
    low = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high


def ones(p: Part) -> int:
    """How many of the point's repetitions read 1 (its value is their share)."""
    return round(p.value * p.n)


def interval(p: Part, alpha: float) -> tuple[float, float]:
    """How far coef x the point's share may lie below and above coef x its observed share, level 1 - alpha."""
    low, high = clopper_pearson(ones(p), p.n, alpha)
    below, above = p.value - low, high - p.value
    c = abs(p.coef)
    return (c * below, c * above) if p.coef >= 0 else (c * above, c * below)


def widths(parts: list[Part], alpha: float) -> tuple[float, float]:
    """The sum of the points' interval(p, alpha)."""
    ends = [interval(p, alpha) for p in parts]
    return sum(d for d, _ in ends), sum(u for _, u in ends)


def text(p: Part, alpha: float) -> str:
    """What a claim's basis says of the point."""
    low, high = clopper_pearson(ones(p), p.n, alpha)
    return (f"{p.key}: {ones(p)} of {p.n} repetitions read 1, a share in [{fmt(low)}, {fmt(high)}] "
            f"(Clopper-Pearson, exact)")
