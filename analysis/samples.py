"""What a claim's verdict rests on: independent repetitions' values, never intervals within one run.

A quantity at one point is its repetitions' values (one number per repetition: the repetition's mean of its
measured intervals), after the spoiled repetitions are left out (`usable`). An `Estimate` is their mean with the
point's sample variance and count, or a combination of several points' estimates:

- at one point, two quantities combine repetition by repetition (a share of the system's goodput, a flow's
  goodput against another's, a sum over flows): paired, so what the repetitions share cancels;
- across points (different repetitions, independent) a difference adds the variances, a ratio takes the
  delta method on the two means (first order; fine while the denominator's interval stays well away from 0);
- the degrees of freedom of a combination are Welch-Satterthwaite's over its points.
A model's prediction is a constant (no variance). analysis/sequential.py turns an Estimate into a verdict.

Adjusted for the loss drawn (a study's `adjust_for_loss`: the metrics it names). Where a point drops packets at
random with probability p, each repetition draws its own realised loss, and one that drew less delivers more:
study 001's five PER runs of 2026-12-05/06 (15-32 repetitions a point) read a correlation of -0.2 to -0.85
between a repetition's goodput and its loss drawn, +0.3 to +0.8 for UAR, so a few repetitions can land on one side
of the draw's spread (run AO's three at PER 0.1 drew 0.093-0.098 and read a goodput apart from AJ's twelve at
0.098-0.106). The loss drawn (readings.loss_drawn: dropped minus p times offered, over offered) has a known mean,
0, so it is a control variate: the point's value is the intercept of the repetitions' least-squares line on it,
its value at no loss drawn, with the intercept's standard error and n - 2 degrees of freedom (Part.lost_df),
exact under the linear model with normal errors whatever the slope; it removes the share of the variance the draw
explains (r squared) at the price of a degree of freedom, so it starts at ADJUST_MIN_N repetitions. A combination
at one point (a ratio of two quantities) is adjusted again as a whole.

What the kernel's BPF struct_ops fault spoils (tcp_modules/bpf_fault.py: the kernel skips a law's callback and a
flow's ssthresh, then its window, become garbage until a loss brings it back). Measured on this machine's kernel
(6.18.44-fc, 2026-11-25, the machine shared and busy) with study 001's per_10mbit spec without its sweep (the
BPF law ab_standard, 10 Mbit/s, 50-packet pfifo, PER 0.01, 12 s, 2 warm-up intervals), beside the same spec with
the kernel's built-in reno (the same AIMD law, never skipped); tests/host/bpf_fault_spoils.py groups the intervals.
6 flows, 12 repetitions: the fault hit 11 (1-4 flows each). The flows it did not hit, goodput over their fair
share per interval: 0.989 in the repetition without a fault (reno, 8 repetitions: 0.990), 0.861 in the intervals
a fault's span touched, 0.768 in the interval after one, 0.983 in the intervals later; the faulted flows 1.15 in
theirs. Jain's index over throughput: 0.928 (reno 0.940), 0.654, 0.785, 0.917; EEE 0.023 (reno 0.021), 0.216,
0.060, 0.040. 30 flows, 10 repetitions: 125 of 300 flows hit, 88 of the 100 measured intervals touched; Jain 0.709
in touched intervals, 0.829 in the rest, 0.852 with reno; EEE 0.230, 0.140, 0.141; per repetition Jain 0.72 ± 0.12
(reno 0.85 ± 0.03), falling with the number of flows hit (0.79 with 5, 0.54 with 18); the system's goodput 9.45
against reno's 9.47 Mbit/s. So a fault spoils more than its own flow: while it lasts the faulted flow's burst takes
the others' share and its losses cut their windows, which climb back within the next interval. Decision: the
intervals a fault's span touches and the one after (FAULT_AFTER) leave every flow's and the system's means
(fault_exclusion; repetition.json's `fault_exclusion` and `exclusions`), the rest stays; a repetition with less
than FAULT_MIN_LEFT of its measured intervals left is spoiled: with 30 flows nearly every one, which is what the
fault does to such a point on this kernel (the engine reruns it, then calls the point unmeasurable). Known
residual: the system's loss in the interval before a detected span is 0.12 (n 10; reno 0.026), with goodput, Jain
and EEE there as without a fault: faults too short for the 20 ms sampler (the laws' cap ends them between samples),
or faults striking where losses cluster (the ssthresh callback runs on a loss); a loss claim may carry it.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

# |collector's bytes acked / the workload program's bytes received - 1| beyond this: the two counters disagree and
# the repetition's numbers are not trusted. Healthy runs here stay within 1.4 % per flow (12 BPF flows at PER 0.01;
# 10 reno flows at PER 0.4, whose smallest carried 70 kB: 1.2 %); the host tests hold a run to 3 %
# (tests/host/test_dumbbell.py)
COLLECTOR_TOLERANCE = 0.03
# a repetition keeps its place in a verdict while at least this share of its measured intervals is left after the
# kernel fault's are excluded: its mean over the rest is then still a mean over most of its run (see the module's
# docstring for the measurement behind excluding intervals)
FAULT_MIN_LEFT = 0.5
# a point's values are adjusted for the loss its repetitions drew (`adjusted`) from this many repetitions on, never
# fewer: the adjustment costs a degree of freedom, and at the last look's level (two-sided ~0.017) with a
# correlation of 0.7 between a repetition's value and its loss drawn (study 001's PER points: 0.2-0.85) the
# interval is wider than the plain mean's below 8 repetitions and about 15 % narrower at 8, 25 % at 10, 30 % from
# 15 (tests/unit/test_adjust.py). A rule fixed before the data, so the interval's coverage holds either way
ADJUST_MIN_N = 8
# the intervals after a fault's span that it still disturbs: the burst's losses have halved the other flows' windows
# and they climb back (the interval after: the others at 0.77 of their fair share; later: 0.98, as without a fault)
FAULT_AFTER = 1


class NotRun(Exception):
    """A point a quantity reads is not in the archive, or has no value there (not-applicable, with the reason)."""


class Unmeasured(NotRun):
    """A point a quantity reads ran, but none of its repetitions is usable (each left out for its reason: the
    machine limited it, the kernel's fault touched it, ...): the claim applies and is undecided (repetitions on a
    quieter machine, or a later run, would decide it), not not-applicable, which counts as decided. Study 000's
    run of 2026-12-03 15:06 under 16 % steal: a point whose three attempts the delay line's lateness spoiled made
    its claim not-applicable. `points`: the points not measured (SPEC#INDEX[/baseline]), where a study's budget
    loop may run a first pass again."""

    def __init__(self, why: str, points: list[str] | None = None):
        super().__init__(why)
        self.points = points or []


class Cut(Unmeasured):
    """A point a quantity reads was not run because the study's --budget ended first: its claim is undecided
    (more pairs would decide it), not not-applicable, which counts as decided."""


def not_run(spec: str) -> str:
    """The basis of a claim that reads a spec the run left out (a part of a study: --specs, --quick)."""
    return f"spec {spec} was not run"


def outside_the_run(claim: dict) -> bool:
    """A claims.json claim its run did not judge: it reads a spec that run left out (not_run's words)."""
    return claim.get("verdict") == "not-applicable" and bool(re.fullmatch(r"spec \S+ was not run",
                                                                        claim.get("basis") or ""))


Bounds = tuple[float | None, float | None]   # what one repetition's value can be: (low, high), None unbounded
UNBOUNDED: Bounds = (None, None)


@dataclass(frozen=True)
class Part:
    """One point's share of an estimate: coef times the mean (`value`) of n repetitions whose sample variance is
    var; `bounds` is the range one repetition's value can take (the metric's, analysis/metric_table.py), which
    is all that bounds the mean when every repetition reads the same (analysis/flat.py)."""
    key: str
    coef: float
    var: float
    n: int
    value: float = 0.0
    bounds: Bounds = UNBOUNDED
    binary: bool = False     # each repetition read 1 or 0: value is a share, judged exactly (analysis/binary.py)
    lost_df: int = 1         # n - lost_df degrees of freedom: 1 for a mean, 2 adjusted for the loss drawn


@dataclass(frozen=True)
class Estimate:
    mean: float
    parts: tuple[Part, ...] = ()
    key: str | None = None                         # the one point it comes from, when it is one point's
    reps: tuple[tuple[int, float], ...] = ()       # then its values, by repetition number
    why: str = ""                                  # a constant's origin (a model's prediction)
    bounds: Bounds = UNBOUNDED                     # then the range one repetition's value can take
    drawn: tuple[tuple[int, float], ...] = ()      # then each repetition's loss drawn, when adjusted for it

    @property
    def se(self) -> float:
        return math.sqrt(sum(p.coef ** 2 * p.var / p.n for p in self.parts if p.n > 0))

    @property
    def df(self) -> float:
        """Welch-Satterthwaite's degrees of freedom over the points (inf without variance)."""
        v = [p.coef ** 2 * p.var / p.n for p in self.parts if p.n > 0]
        den = sum(x * x / (p.n - p.lost_df) for x, p in zip(v, (p for p in self.parts if p.n > 0))
                  if p.n > p.lost_df)
        return sum(v) ** 2 / den if den > 0 else math.inf

    @property
    def n(self) -> int:
        return min((p.n for p in self.parts), default=0)

    def to_dict(self) -> dict:
        return {"mean": self.mean, "se": self.se, "n": self.n, "points": {p.key: p.n for p in self.parts},
                **({"why": self.why} if self.why else {})}

    def __str__(self) -> str:
        return fmt(self.mean) + (f" (se {fmt(self.se)}, n {self.n})" if self.parts else "")


def fmt(x: float) -> str:
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.3g}M"
    if a >= 1e3:
        return f"{x / 1e3:.3g}k"
    return f"{x:.3g}"


def from_reps(key: str, values: dict[int, float], bounds: Bounds = UNBOUNDED, binary: bool = False,
              drawn: dict[int, float] | None = None) -> Estimate:
    """One point's repetitions' values (repetition number -> value), each within bounds (None: unbounded);
    binary: each is 1 or 0. drawn: each repetition's loss drawn (readings.loss_drawn), to adjust for it from
    ADJUST_MIN_N repetitions on (adjusted)."""
    xs = [float(v) for v in values.values()]
    if not xs:
        raise NotRun(f"{key}: no usable repetition")
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    # a value outside the declared range says the range is wrong, not the value: the range widens to hold it
    lo, hi = bounds
    bounds = (None if lo is None else min(lo, *xs), None if hi is None else max(hi, *xs))
    if binary and any(x not in (0.0, 1.0) for x in xs):
        raise ValueError(f"{key}: a binary point's repetitions read 1 or 0, got {sorted(set(xs))}")
    use = {r: drawn[r] for r in values} if drawn and not binary and all(r in drawn for r in values) else {}
    fit = adjusted(xs, list(use.values())) if len(use) >= ADJUST_MIN_N else None
    if fit is None:
        return Estimate(mean, (Part(key, 1.0, var, n, mean, bounds, binary),), key, tuple(sorted(values.items())),
                        bounds=bounds)
    mean, se = fit
    # var as one repetition's share of the intercept's variance (n x se^2), so var / n is its se^2 as for a mean
    part = Part(key, 1.0, se * se * n, n, mean, bounds, lost_df=2)
    # the repetitions' own values stay, with what each drew: a combination at this point adjusts them again
    return Estimate(mean, (part,), key, tuple(sorted(values.items())), bounds=bounds,
                    drawn=tuple(sorted(use.items())))


def adjusted(ys: list[float], drawn: list[float]) -> tuple[float, float] | None:
    """The point's value at no loss drawn, and its standard error: the intercept of the least-squares line of the
    repetitions' values on their loss drawn, whose mean is known to be 0 (a control variate). Under the linear
    model with normal errors (intercept - value) / se is Student's t with n - 2 degrees of freedom whatever the
    slope (with none, the adjustment costs that degree of freedom and buys nothing). None when every repetition
    drew the same."""
    from scipy.stats import linregress   # lazy: scipy.stats takes a while to import (a guest never adjusts)
    if len(set(drawn)) < 2:
        return None
    fit = linregress(drawn, ys)
    return float(fit.intercept), float(fit.intercept_stderr)


def constant(x: float, why: str) -> Estimate:
    return Estimate(float(x), why=why)


def _paired(a: Estimate, b: Estimate, f, bounds: Bounds = UNBOUNDED) -> Estimate | None:
    """Repetition by repetition, when both come from the same point's repetitions."""
    if a.key is None or a.key != b.key:
        return None
    bv = dict(b.reps)
    out = {r: f(x, bv[r]) for r, x in a.reps if r in bv}
    if any(v is None for v in out.values()):
        raise NotRun(f"{a.key}: a ratio's denominator is 0 in a repetition")
    return from_reps(a.key, out, bounds, drawn=dict(a.drawn) if a.drawn and b.drawn else None)


def _with(p: Part, coef: float) -> Part:
    return dataclasses.replace(p, coef=coef)


def _sub(x: float | None, y: float | None) -> float | None:
    return None if x is None or y is None else x - y


def diff(a: Estimate, b: Estimate) -> Estimate:
    (alo, ahi), (blo, bhi) = a.bounds, b.bounds
    bounds = (_sub(alo, bhi), _sub(ahi, blo))
    paired = _paired(a, b, lambda x, y: x - y, bounds)
    if paired is not None:
        return paired
    return Estimate(a.mean - b.mean, a.parts + tuple(_with(p, -p.coef) for p in b.parts), bounds=bounds)


def ratio(a: Estimate, b: Estimate) -> Estimate:
    paired = _paired(a, b, lambda x, y: x / y if y else None)   # a ratio's range: unknown without more
    if paired is not None:
        return paired
    if b.mean == 0:
        raise NotRun("a ratio's denominator is 0")
    r = a.mean / b.mean
    return Estimate(r, tuple(_with(p, p.coef / b.mean) for p in a.parts)
                    + tuple(_with(p, -p.coef * r / b.mean) for p in b.parts))


def scale(e: Estimate, k: float, shift: float = 0.0) -> Estimate:
    """k * e + shift."""
    ends = [None if x is None else k * x + shift for x in e.bounds]
    bounds = (ends[0], ends[1]) if k >= 0 else (ends[1], ends[0])
    return Estimate(k * e.mean + shift, tuple(_with(p, k * p.coef) for p in e.parts), e.key,
                    tuple((r, k * x + shift) for r, x in e.reps), e.why, bounds, e.drawn)


# --- spoiled repetitions ------------------------------------------------------------------------------------

def fault_exclusion(faults: list[dict], interval: float, warmup: int, n: int) -> dict | None:
    """What the kernel's BPF struct_ops faults in one repetition spoil (faults: summary.json's `kernel_fault`, each
    flow's fault spans in seconds since traffic start): every measured interval (warmup..n-1, each `interval` s
    long) a fault's span overlaps and the FAULT_AFTER after it, for every flow and the system (the module's
    docstring has the measurement). None without a fault."""
    spans = [(float(a), float(b)) for f in faults for a, b in f.get("spans_s") or []]
    if not faults:
        return None
    hit = {i for i in range(n) for a, b in spans if i * interval < b and (i + 1) * interval > a}
    touched = sorted({i + k for i in hit for k in range(FAULT_AFTER + 1) if warmup <= i + k < n})
    measured = max(0, n - warmup)
    return {"intervals": touched, "measured": measured, "left": measured - len(touched),
            "flows": sorted(f["flow"] for f in faults),
            "reason": f"the kernel's BPF struct_ops fault: a faulted flow's window was the kernel's, not its law's, "
                      f"and its burst took the other flows' share while it lasted and for {FAULT_AFTER} interval(s) "
                      f"after"}


def spoiled(rep: dict) -> str | None:
    """Why a repetition's numbers must not enter a verdict, or None (spoiled_by says it with its kind)."""
    by = spoiled_by(rep)
    return None if by is None else by[1]


def spoiled_by(rep: dict) -> tuple[str, str] | None:
    """(kind, why) a repetition's numbers must not enter a verdict, or None; kind is fidelity, kernel_fault,
    collector or unreliable. The engine reruns such repetitions, how by the kind (experiments/run/reruns.py).

    A kernel fault spoils the intervals it touched (fault_exclusion, recorded in the repetition's
    `fault_exclusion`, its means taken without them); the repetition goes only when fewer than FAULT_MIN_LEFT of
    its measured intervals are left, or when it was recorded before the intervals were excluded (its means hold
    the fault's). A disagreement between the collector and the workload's own count touches every number of the
    repetition, so the whole repetition goes."""
    fid = rep.get("fidelity") or {}
    if fid.get("verdict", "ok") != "ok":
        return "fidelity", f"fidelity {fid['verdict']}: {'; '.join(fid.get('reasons') or []) or 'no reason given'}"
    faults = rep.get("kernel_fault") or []
    if faults:
        hit = f"the BPF struct_ops fault hit flow(s) {', '.join(str(f.get('flow')) for f in faults)}"
        ex = rep.get("fault_exclusion")
        if ex is None:
            return "kernel_fault", f"kernel_fault: {hit}, and this repetition's means include the intervals it " \
                                   "touched"
        if ex["left"] < FAULT_MIN_LEFT * ex["measured"] or ex["left"] <= 0:
            return "kernel_fault", (f"kernel_fault: {hit}; it touched {len(ex['intervals'])} of {ex['measured']} "
                                    f"measured intervals, leaving {ex['left']} (a repetition needs "
                                    f"{FAULT_MIN_LEFT:.0%} of them)")
    for c in rep.get("cross_check") or []:
        if collector_disagrees(c):
            flight = c.get("collector_in_flight_bytes")
            return "collector", (f"collector disagreement: flow {c.get('flow')}'s bytes acked differ from the "
                                 f"workload's count by {100 * c['collector_vs_iperf3']:+.1f} % (beyond "
                                 f"±{100 * COLLECTOR_TOLERANCE:g} %"
                                 + (f", {flight} bytes in flight from the workload's end on" if flight else "")
                                 + ")")
    if rep.get("unreliable"):
        return "unreliable", f"unreliable: {rep['unreliable']}"
    return None


def collector_disagrees(check: dict) -> bool:
    """Whether a flow's collector and its workload program disagree (summary.cross_check's entry) by more than
    COLLECTOR_TOLERANCE beyond what was in flight from the workload's end on, either way:
    - the program ahead: the collector's last sample of the sender can precede the socket's end by one sampling
      period, and at the test's end the ACKs of the last data iperf3's server read arrive in a burst (at 500 ms RTT
      10 KB, 4 % of a 10 Mbit/s flow's 30 s: 7 of 11 reruns of study 001's 10 Mbit/s points);
    - the collector ahead: iperf3's server stops counting at the test's end while the kernel goes on acking what
      was in flight then; one retransmission that fills a hole acks every segment queued behind it (study 001 run
      D, 100 Mbit/s, PER 0.1: 13032 bytes, 9 segments, acked at once 3 s after the end, +4.2 % of a 311 KB flow).
    Never more than that: a collector that lost the socket earlier, or counted another one, is still caught. Still
    caught, and not explained: at 500 ms RTT, now and then every socket of a repetition leaves the collector's
    view at one poll while iperf3 goes on counting (2 of 117 pairs of study 001; `collector_last_s` records when
    each was seen last)."""
    d = check.get("collector_vs_iperf3")
    if d is None:
        return False
    own, flight = check.get("iperf3_bytes_received"), check.get("collector_in_flight_bytes")
    if not own or flight is None:   # an entry from before the in-flight bytes were recorded
        return abs(d) > COLLECTOR_TOLERANCE
    beyond = (abs(check["collector_bytes_acked"] - own) - flight) / own
    return beyond > COLLECTOR_TOLERANCE


def exclusions(rep: dict) -> list[dict]:
    """Every part of a repetition left out of what a verdict reads, each with its reason: the intervals a kernel
    fault touched, or the whole repetition (spoiled)."""
    out = []
    ex = rep.get("fault_exclusion")
    if ex and ex.get("intervals"):
        out.append({"what": "intervals", "intervals": ex["intervals"], "flows_hit": ex.get("flows", []),
                    "reason": ex.get("reason", "kernel fault")})
    why = spoiled(rep)
    if why is not None:
        out.append({"what": "repetition", "reason": why})
    return out


def usable(reps: list[dict]) -> tuple[list[tuple[int, dict]], list[tuple[int, str]]]:
    """A point's repetitions split into those a verdict may read and those left out, each with its reason;
    a repetition is known by its `rep` number (its position when it has none)."""
    good, bad = [], []
    for i, rep in enumerate(reps):
        number = rep.get("rep", i)
        why = spoiled(rep)
        (good.append((number, rep)) if why is None else bad.append((number, why)))
    return good, bad
