"""Interval statistics (Keshav, ch. 6): a run is cut into measurement intervals, the first (warm-up)
intervals are discarded, and a metric is reported as the mean of interval means with its standard deviation
and a 95 % confidence interval from Student's t. Repetitions add a second level: the mean of the
repetitions' means, with a confidence interval over repetitions.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats as _st


def summarize(values: Sequence[float]) -> dict:
    """{"mean", "std", "ci95": [lo, hi], "n"} of a sample; std and the interval need n >= 2."""
    xs = [float(v) for v in values if v is not None and not math.isnan(v)]
    n = len(xs)
    if n == 0:
        return {"mean": None, "std": None, "ci95": [None, None], "n": 0}
    mean = sum(xs) / n
    if n == 1:
        return {"mean": mean, "std": 0.0, "ci95": [mean, mean], "n": 1}
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(_st.t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return {"mean": mean, "std": std, "ci95": [mean - half, mean + half], "n": n}


def measured(values: Sequence[float], warmup: int) -> list[float]:
    """The intervals that count: all but the first `warmup`."""
    return list(values[warmup:])


def over_repetitions(per_rep: Sequence[dict]) -> dict:
    """Second level: the repetitions' summaries combined. With one repetition, that repetition's own."""
    if len(per_rep) == 1:
        return dict(per_rep[0])
    return summarize([r["mean"] for r in per_rep if r["mean"] is not None])
