"""Interval statistics (Keshav, ch. 6): a run is cut into measurement intervals, the first (warm-up)
intervals are discarded, and a metric is reported as the mean of interval means with a confidence interval.

Interval means of one flow are strongly autocorrelated (lag-1 0.6–0.9 on the default spec), so Student's t
over them as if they were independent (`summarize`, kept for its callers) gives intervals 2–4× too narrow.
The intervals that hold (`confidence`, returning a `Ci` that names its method):

- "runs": across independent repetitions, Student's t over the repetitions' means — the primary interval
  whenever there are two or more.
- "batches": within one run, batch means: consecutive intervals merged into batches long enough to be nearly
  uncorrelated, Student's t over the batch means, their small remaining bias removed (see `within_run`).
- "none": too little to say; the result keeps the mean and gives the reason instead of an interval.
Every one takes a confidence level: 0.95 by default, `sigma_level(3)` (0.9973) for Keshav's 3σ.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .sequential import norm_quantile, t_quantile

LEVEL = 0.95
MIN_BATCHES = 5          # t with 4 degrees of freedom: the interval is at most ~1/3 wider than with σ known
TARGET_BATCH_LAG1 = 0.1  # batches this little correlated count as "nearly uncorrelated"
MAX_BATCH_LAG1 = 0.3     # beyond this the bias correction would carry the interval, not the batches
DRIFT_P = 0.01           # batch means more correlated than AR(1) allows, at this significance: a drift
PHI_CAP = 0.99           # the AR(1) formulas degenerate at 1; a lag-1 of 0.99 already asks for runs of 1000s


def sigma_level(sigmas: float) -> float:
    """The two-sided confidence level of ±`sigmas` standard deviations of a normal: 3 -> 0.9973 (Keshav's 3σ)."""
    return math.erf(sigmas / math.sqrt(2))


@dataclass(frozen=True)
class Ci:
    """A mean and its confidence interval, saying how it was obtained. `std` is the spread of the samples the
    mean is taken over (interval means, or the runs' means); `n` their count; `n_eff` the number of independent
    samples that would give the same standard error (n for runs; less for correlated intervals); `batch_len`,
    `batches` and `lag1` (the intervals' lag-1 autocorrelation, bias-corrected) only for "batches" and "none"
    within a run. low/high/half_width are None when method is "none", and `reason` says why."""
    mean: float | None
    std: float | None
    low: float | None
    high: float | None
    half_width: float | None
    level: float
    method: str
    n: int
    n_eff: float | None = None
    batch_len: int | None = None
    batches: int | None = None
    lag1: float | None = None
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _clean(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(v)]


def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1) of at least two values."""
    n = len(xs)
    mean = sum(xs) / n
    return mean, math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))


def summarize(values: Sequence[float]) -> dict:
    """{"mean", "std", "ci95": [lo, hi], "n"} of a sample taken as independent; std and the interval need n >= 2.
    Right for independent samples (repetitions' means); too narrow for one run's intervals — see `confidence`."""
    xs = _clean(values)
    n = len(xs)
    if n == 0:
        return {"mean": None, "std": None, "ci95": [None, None], "n": 0}
    if n == 1:
        return {"mean": xs[0], "std": 0.0, "ci95": [xs[0], xs[0]], "n": 1}
    mean, std = _mean_std(xs)
    half = t_quantile(LEVEL, n - 1) * std / math.sqrt(n)
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
    return r, r * rel * t_quantile(LEVEL, min(na, nb) - 1)


# --- the intervals that hold ---------------------------------------------------------------------------------

def confidence(runs: Sequence[Sequence[float]], level: float = LEVEL) -> Ci:
    """The confidence interval of a metric given each repetition's measured interval values: across the runs'
    means when at least two runs have values, else within the one run by batch means."""
    per_run = [xs for xs in (_clean(r) for r in runs) if xs]
    if len(per_run) >= 2:
        return over_runs([sum(xs) / len(xs) for xs in per_run], level)
    return within_run(per_run[0] if per_run else [], level)


def over_runs(means: Sequence[float], level: float = LEVEL) -> Ci:
    """Student's t over independent repetitions' means (exact for normal means, whatever each run's
    autocorrelation). One mean gives "none"."""
    xs = _clean(means)
    n = len(xs)
    if n < 2:
        return Ci(xs[0] if xs else None, None, None, None, None, level, "none", n,
                  reason="one repetition: no spread across runs" if xs else "no values")
    mean, std = _mean_std(xs)
    half = t_quantile(level, n - 1) * std / math.sqrt(n)
    return Ci(mean, std, mean - half, mean + half, half, level, "runs", n, n_eff=float(n))


def lag1(values: Sequence[float]) -> float:
    """The sample lag-1 autocorrelation (mean removed, the usual n-term denominator); 0 for a constant series."""
    x = np.asarray(values, dtype=float)
    d = x - x.mean()
    ss = float(d @ d)
    return float(d[1:] @ d[:-1]) / ss if ss > 0 else 0.0


def within_run(values: Sequence[float], level: float = LEVEL) -> Ci:
    """Batch means over one run's measured intervals (in time order).

    The rule, and why. Interval means behave much like an AR(1) series with lag-1 autocorrelation φ; its means
    of batches of b intervals have a lag-1 correlation ρ_b(φ) that falls roughly as φ/((1−φ²)·b) (`_batch_lag1`).
    The batch means' own sample lag-1 cannot choose b: a run has 5–20 batches, and over k batches the sample
    lag-1 has a spread of about ±1/√k (±0.45 at k = 5) and a bias of about −1/k, so it says "uncorrelated"
    long before the batches are. The run's n intervals estimate φ far better, so:
    1. φ̂ = the intervals' lag-1 autocorrelation corrected for its small-sample bias (E r₁ ≈ φ − (1+4φ)/n,
       Marriott & Pope 1954), clipped to [0, 0.99]: a negative φ̂ would narrow the interval, and is not trusted.
    2. b grows from 1 until ρ_b(φ̂) ≤ TARGET_BATCH_LAG1 (0.1), but no further than leaves MIN_BATCHES (5)
       batches; the earliest intervals that fill no batch are left out of the batches (they are the nearest to
       the warm-up), not out of the mean.
    3. "none" when those batches would still be correlated beyond MAX_BATCH_LAG1 (0.3): the run is too short
       for its own correlation, and the reason says how many intervals would do. Also "none" when the batch
       means' sample lag-1 exceeds what AR(1) allows them at 1 % significance: a drift or a slow cycle that
       one lag of the intervals does not show.
    4. Student's t with k − 1 degrees of freedom over the k batch means, their variance divided by its bias
       factor under AR(1) (`_bias`). Without it the interval falls short even for "nearly uncorrelated"
       batches: at ρ_b = 0.1 and 5 batches the batch means understate the variance of the mean by ~17 %
       (~42 % at ρ_b = 0.3), which takes a 95 % interval to ~93 % (φ = 0.8, 120 intervals, fixed 5 batches)
       and lower for shorter runs. The factor is evaluated at φ̂ + one standard error (√((1−φ̂²)/n)), so the
       correction errs wide where φ̂ is uncertain: at φ = 0.8 the point estimate alone leaves 94.3 % at 120
       intervals and 89 % at 60; the price is 96–98.5 % instead of 95 % for uncorrelated intervals.
    The batches carry the interval; the AR(1) view only picks their length and trims a bias of at most ~40 %.
    Checked by simulation (tests/unit/test_stats_ci.py): φ = 0.8, 120 intervals: 95 % intervals cover the
    true mean in ~95 % of runs (over seeds 94–96 %; the naive t over intervals ~47 %); 1–2 % get "none".
    A run too short for its correlation (29 intervals at φ = 0.8: the default spec) mostly gets "none". The
    ~20 % that get an interval are those whose φ̂ came out low, so only ~75 % of those cover; the reason one
    cannot do better is that 29 intervals cannot tell φ = 0.8 from 0.5. What holds is that a missing interval
    is printed for no more than ~5–6 % of runs — but for such runs the intervals across repetitions are the
    ones to trust. (Deciding with the upper bound of φ instead gives fewer intervals that cover even less.)"""
    xs = _clean(values)
    n = len(xs)
    if n == 0:
        return Ci(None, None, None, None, None, level, "none", 0, reason="no values")
    mean = sum(xs) / n
    std = _mean_std(xs)[1] if n >= 2 else 0.0

    def none(reason: str, **kw) -> Ci:
        return Ci(mean, std, None, None, None, level, "none", n, reason=reason, **kw)

    if n < MIN_BATCHES:
        return none(f"{n} intervals: fewer than {MIN_BATCHES} batches even of one interval")
    if std == 0.0:
        return Ci(mean, 0.0, mean, mean, 0.0, level, "batches", n, n_eff=float(n), batch_len=1, batches=n,
                  lag1=0.0, reason="all intervals equal")
    phi = min(max((n * lag1(xs) + 1) / (n - 4), 0.0), PHI_CAP)
    longest = n // MIN_BATCHES
    lengths = np.arange(1, longest + 1)
    fit = np.nonzero(_batch_lag1(lengths, phi) <= TARGET_BATCH_LAG1)[0]
    b = int(lengths[fit[0]]) if fit.size else longest
    k = n // b
    rho = float(_batch_lag1(b, phi))
    shape = {"batch_len": b, "batches": k, "lag1": phi}
    if rho > MAX_BATCH_LAG1:
        need = _length_needed(phi)
        return none(f"intervals' lag-1 autocorrelation {phi:.2f}: batches of {b} still correlated "
                    f"({rho:.2f} > {MAX_BATCH_LAG1}); needs ≥ {need} intervals or ≥ 2 repetitions", **shape)
    batch_means = np.asarray(xs[n - k * b:]).reshape(k, b).mean(axis=1)
    r_b = lag1(batch_means)
    # what AR(1) lets the k batch means' sample lag-1 be: ρ_b less its small-sample bias, plus z·√((1−ρ_b²)/k)
    if r_b > rho - (1 + 4 * rho) / k + norm_quantile(1 - DRIFT_P) * math.sqrt((1 - rho * rho) / k):
        return none(f"the {k} batch means of {b} intervals are themselves correlated (lag-1 {r_b:.2f}): "
                    "a drift or a slow cycle; more repetitions needed", **shape)
    phi_hi = min(phi + math.sqrt((1 - phi * phi) / n), PHI_CAP)
    var_mean = float(batch_means.var(ddof=1)) / k / _bias(k, b, n, phi_hi)
    half = t_quantile(level, k - 1) * math.sqrt(var_mean)
    n_eff = std * std / var_mean if var_mean > 0 else float(n)
    return Ci(mean, std, mean - half, mean + half, half, level, "batches", n, n_eff=n_eff, **shape)


def _ar1_sum_var(m, phi: float):
    """Var of the sum of m consecutive values of a unit-variance AR(1) with coefficient phi (m may be an array)."""
    if phi <= 0:
        return np.asarray(m, dtype=float)
    return m * (1 + phi) / (1 - phi) - 2 * phi * (1 - phi ** m) / (1 - phi) ** 2


def _batch_lag1(b, phi: float):
    """Lag-1 correlation of adjacent batch means of b values of that AR(1) (b may be an array)."""
    if phi <= 0:
        return np.zeros_like(np.asarray(b, dtype=float))
    return phi * (1 - phi ** b) ** 2 / (1 - phi) ** 2 / _ar1_sum_var(b, phi)


def _bias(k: int, b: int, n: int, phi: float) -> float:
    """E[s²/k] / Var(mean of all n) for k batch means of b values (the last k·b of n) of that AR(1): with
    E[Σ(Bᵢ − B̄)²] = k·(Var Bᵢ − Var B̄). 1 for independent values with k·b = n."""
    var_b = _ar1_sum_var(b, phi) / b ** 2
    var_kb = _ar1_sum_var(k * b, phi) / (k * b) ** 2
    var_n = _ar1_sum_var(n, phi) / n ** 2
    return float((var_b - var_kb) / ((k - 1) * var_n))


def _length_needed(phi: float) -> int:
    """Intervals for MIN_BATCHES batches correlated no more than TARGET_BATCH_LAG1 at this lag-1."""
    b = 1
    while _batch_lag1(b, phi) > TARGET_BATCH_LAG1:
        b += 1
    return MIN_BATCHES * b
