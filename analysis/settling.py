"""Whether a point's warm-up outlasted its transient: a drift test over its independent repetitions.

    drift(series, warmup, window=None) -> the test's record, or None (fewer than MIN_REPS repetitions with a window
        to halve; window: a periodic point's whole periods)
    problem(record) -> the sentence a run's tables print when the point still settles, else None
    change(record) -> how the halves differ, in words (what a claim's basis says of a point it reads)

A mean over a window the transient still holds is not the steady state the claims and the models speak of: in
study 001 (30 flows, 500 ms RTT) smooth TCP(0.31, 7/8) took 20-40 s to come down from slow start's window, and
its 25 measured seconds read 1.3-2.7 times its later mean. The warm-up is a knob like any other, so it is checked
by a measurement, not by the Eq. 4 argument that chose it.

Each repetition's measured window (the intervals after the warm-up) is cut in halves; D = (first half's mean -
second half's) / the window's mean. Within a repetition the halves are correlated, across repetitions the D are
independent, so Student's t over them (scipy.stats.ttest_1samp, two-sided) tests for a drift every repetition
shares. A point still settles when p < LEVEL and |mean D| >= SHARE: at most LEVEL of the points whose goodput is
stationary are named (the t test's error rate; the share only removes more), and a drift of SHARE between halves
is about half of it in the window's mean (a linear decay). A point whose links change on one period (study 001's
handoffs: down 0.2 s every 10 s) is steady period by period, not interval by interval: its window is the whole
periods after the warm-up, cut in halves of whole periods, so like is compared with like (`block`, the period in
intervals). A point whose flows start or stop inside the window, or whose links change on no one period, moves by
design: the caller leaves those out (experiments/run/summary.steady_window).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as scipy_stats

from . import stats

LEVEL = 0.05      # the test's error rate: of stationary points, at most this share named
SHARE = 0.10      # halves this far apart (relative to the window's mean): about 5 % off in the mean
MIN_REPS = 3      # t with 2 degrees of freedom at least; two repetitions would need a drift of t > 12.7
MIN_INTERVALS = 4  # a window of at least two intervals a half


def _relative_drift(values: Sequence[float | None], start: int, end: int | None, block: int) -> float | None:
    """One repetition's D over intervals start..end (whole blocks of `block` intervals), or None when the window
    is too short or carried nothing. A fault's intervals (None) are left out: of the window (block 1), or of their
    block (a period keeps its place)."""
    window = stats.measured(values, start)[:None if end is None else end - start]
    usable = lambda xs: [v for v in xs if v is not None and math.isfinite(v)]
    if block == 1:
        blocks = [[v] for v in usable(window)]
        if len(blocks) < MIN_INTERVALS:
            return None
    else:
        blocks = [usable(window[i:i + block]) for i in range(0, len(window) - block + 1, block)]
        if len(blocks) < 2 or any(len(b) < block / 2 for b in blocks):
            return None
    half = len(blocks) // 2
    first, second = (np.concatenate(x).astype(float) for x in (blocks[:half], blocks[-half:]))
    mean = np.concatenate(blocks).astype(float).mean()
    if mean <= 0:
        return None
    return float((first.mean() - second.mean()) / mean)


def drift(series: Sequence[Sequence[float | None]], warmup: int, metric: str = "goodput_bps",
          window: tuple[int, int | None, int] | None = None) -> dict | None:
    """The drift test over a point's repetitions' per-interval series (every interval from the run's start).
    window: (start, end, block), a periodic point's whole periods (intervals start..end, `block` a period);
    default the measured window (warmup to the run's end) in single intervals."""
    start, end, block = window or (warmup, None, 1)
    ds = [d for d in (_relative_drift(s, start, end, block) for s in series) if d is not None]
    if len(ds) < MIN_REPS:
        return None
    mean = float(np.mean(ds))
    p = 1.0 if np.std(ds) == 0 and mean == 0 else float(scipy_stats.ttest_1samp(ds, 0.0).pvalue)
    if math.isnan(p):   # every D equal and non-zero: no spread, a drift as sure as it gets
        p = 0.0
    halves = ("first half of the measured window against the second" if block == 1 else
              f"the whole periods of {block} intervals from interval {start} to {end}, the first half of them "
              f"against the second")
    return {"metric": metric, "warmup": warmup, "block": block, "repetitions": len(ds), "drift": mean,
            "drifts": [round(d, 4) for d in ds], "p": p, "level": LEVEL, "share": SHARE,
            "method": f"{halves}, relative to its mean; Student's t over the repetitions (two-sided)",
            "settled": not (p < LEVEL and abs(mean) >= SHARE)}


def change(record: dict) -> str:
    """How the window's halves differ, in words: 'fell by 44 % of its mean from the window's first half to its
    second (p 0.039)'."""
    way = "fell" if record["drift"] > 0 else "rose"
    return (f"{way} by {abs(record['drift']):.0%} of its mean from the window's first half to its second "
            f"(p {record['p']:.2g})")


def problem(record: dict | None) -> str | None:
    """The sentence a run's tables print for a point still settling, else None."""
    if record is None or record["settled"]:
        return None
    return (f"{record['metric']} still settling after the warm-up of {record['warmup']} intervals: it "
            f"{change(record)}, t over {record['repetitions']} repetitions; the mean is the transient's, not the "
            f"steady state's: lengthen warmup")
