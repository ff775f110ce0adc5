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


def ratio_ci(a: dict, b: dict) -> tuple[float | None, float | None]:
    """a's mean over b's (two summaries as above) and the half width of its 95 % confidence interval, by the
    delta method on the two means' standard errors, Student's t with the smaller sample's degrees of freedom.
    (None, None) without both means or with b's at 0; the half width is None where either has fewer than 2."""
    ma, mb = a.get("mean"), b.get("mean")
    if ma is None or mb is None or mb <= 0:
        return None, None
    r = ma / mb
    na, nb = a.get("n", 1), b.get("n", 1)
    if min(na, nb) < 2:
        return r, None
    rel = math.sqrt((a["std"] / math.sqrt(na) / ma) ** 2 + (b["std"] / math.sqrt(nb) / mb) ** 2) if ma > 0 else 0.0
    return r, r * rel * float(_st.t.ppf(0.975, min(na, nb) - 1))
