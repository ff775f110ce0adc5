"""Verdicts from repetitions, with an error rate that survives repeated looks (a group-sequential design).

A claim is judged on an `Estimate` (analysis/samples.py): the mean of independent repetitions' values, or a
combination of several points' means, with its standard error and Welch-Satterthwaite degrees of freedom. Its
interval is Student's t at the look's nominal level; nothing within one run (no batch means) enters it.

The decision (e: the claim's difference, signed so that positive means "the claim is true"; [L, U] its interval;
m >= 0 the claim's margin, the smallest difference that matters):

    no-difference   -m < L and U < m    equivalence by two one-sided tests (impossible with m = 0)
    holds           L > 0               (or L >= 0 for >= and <=)
    fails           U < 0
    undecided       otherwise: `needs` says how many more repetitions, at which points
A `within` claim (|q - value| <= tol) holds when its interval lies inside ±tol and fails when it lies outside.

The error rate. Each claim may be looked at up to `max_looks` times as repetitions are added. Looking again
inflates the error rate, so the two-sided level alpha (0.05) is spent over the looks by the Lan-DeMets
O'Brien-Fleming-type function alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)), t = look / max_looks, and look k
tests at the increment alpha(k/K) - alpha((k-1)/K) (Bonferroni over the looks). The union bound makes the
increments add up to at most alpha whatever the correlation between looks, with t (not normal) statistics and
an estimated variance; exact group-sequential boundaries would need the looks' information fractions fixed in
advance and a known variance, neither of which holds here.
The price is a wider interval at the last look (two-sided 0.034 instead of ~0.045 for K = 3). Spending by look
number (not by repetitions) keeps each look's level fixed before its data exist; a look after which none can
follow (the budget is spent: `final`) spends all that the earlier looks left. So, per claim:
P(holds or fails | no true difference) <= alpha, and P(no-difference | a true difference of ±m) <= alpha / 2. One
look (max_looks 1: `ccrig study run` without --budget) spends all of alpha at once: the plain (Welch) t interval.

What the union bound does not cover is a sample size chosen from the data, and two such choices broke it in
simulation, so neither is made: the next look's repetitions come from the spread and the margin only, never
from the observed difference (without a margin, or when the spread already meets the planned target and the
interval still straddles a boundary, the next look doubles every point's repetitions; the basis still says what
the observed difference would need), and they go to the points with the fewest repetitions first, not by each
point's observed variance. Checked by simulation in tests/unit/test_sequential.py: with
no true difference 4.0-4.6 % of claims end holds or fails over 3 looks (alpha 5 %; 5000 runs, 6 seeds).

The API the study engine calls (pure: numbers in, decisions out):

    plan(points, design)                          -> {point: k0}: the first pass, k0 repetitions of every point
    judge(estimate, rule, look, design, final)    -> Judgement: verdict, interval, alpha spent, needs
    allocation.next_pairs(judgements, budget_left_s, cost_s)
                                                  -> [(point, n_more)] within the budget (analysis/allocation.py)

A point whose repetitions all read the same value has no spread for t: its bound is exact and distribution-free
instead, from the metric's range (analysis/flat.py), and judge adds it to the t interval of the others; so does
a point whose repetitions each read 1 or 0 (a share of repetitions: Clopper-Pearson's exact interval,
analysis/binary.py).

A point is "SPEC#INDEX" (a PAUSE point's run without PAUSE "SPEC#INDEX/baseline"). analysis/verdicts.py builds a
claim's estimate from the summaries (evaluate(claim, archive, look, design, final) -> Verdict with its Judgement).
The engine's loop (experiments/run/budget.py): plan(); judge every claim at look 1; while some are undecided and
budget is left, allocation.next_pairs(), then judge at the next look (final=True when no budget is left for another).
A claim stops at the first look that decides it (stopped_at, held): later looks still read its points, bought for
other claims, but do not judge it again (study 001 run AI: f9-uar-smooth-above-responsive failed at look 2, got
no repetitions for that reason, and read undecided at look 3 on the others' repetitions of one of its points).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from . import binary as binarypart
from . import flat as flatpart
from .allocation import by_unit
from .samples import Estimate, fmt

STOPS = ("holds", "fails", "no-difference")   # the decisions a claim stops at (not-applicable: no data, not one)
POWER = 0.8          # the chance of a decision that `needs` aims at
MORE_CAP = 1000      # a need beyond this many repetitions per point is "more than the study can give"
_stdtrit = None      # scipy's t quantile, imported by t_quantile when first asked


@dataclass(frozen=True)
class Design:
    """The sequential design: alpha (two-sided, per claim, over all its looks), the looks, the first pass."""
    alpha: float = 0.05
    max_looks: int = 1
    k0: int = 3     # the first pass: 2 give an interval, a third takes its 95 % t quantile from 12.7 to 4.3
    power: float = POWER

    def spent(self, look: int) -> float:
        """alpha spent by the end of `look` (Lan-DeMets O'Brien-Fleming type, by look number)."""
        return _spent(self.alpha, min(max(look, 0), self.max_looks) / self.max_looks)

    def nominal(self, look: int, final: bool = False) -> float:
        """The two-sided level look `look` tests at: its increment of the spending function, or on a final look
        (the budget is spent: no look follows) all that the earlier looks left."""
        return (self.alpha if final else self.spent(look)) - self.spent(look - 1)

    def describe(self) -> dict:
        """The error rate and its method, as claims.json and claims.md state them."""
        return {"alpha": self.alpha, "max_looks": self.max_looks, "k0": self.k0, "power": self.power,
                "per_look": [round(self.nominal(k), 6) for k in range(1, self.max_looks + 1)],
                "method": f"Student's t over independent repetitions (Welch-Satterthwaite df across points; "
                          f"ratios by the delta method); two-sided alpha {self.alpha:g} per claim spent over at "
                          f"most {self.max_looks} look(s) by the Lan-DeMets O'Brien-Fleming-type function, "
                          f"Bonferroni over looks; no-difference by two one-sided tests against the margin",
                "error_rate": f"per claim: P(holds or fails | no true difference) <= {self.alpha:g}; "
                              f"P(no-difference | a true difference of the margin) <= {self.alpha / 2:g}"}


@lru_cache(maxsize=256)
def _spent(alpha: float, t: float) -> float:
    """The Lan-DeMets O'Brien-Fleming-type spending function at information fraction t."""
    if t <= 0:
        return 0.0
    from scipy.special import ndtr, ndtri   # lazy: scipy takes a while to import
    return float(2 - 2 * ndtr(ndtri(1 - alpha / 2) / math.sqrt(t)))


@dataclass(frozen=True)
class Rule:
    """What a claim asks of its estimate e. sided: e's sign (want +1: e > 0 is the claim; strict: > not >=),
    margin the smallest |e| that matters. within: |e| <= tol."""
    kind: str = "sided"
    want: int = 1
    strict: bool = True
    margin: float = 0.0
    tol: float = 0.0


@dataclass
class Judgement:
    verdict: str
    basis: str
    mean: float
    low: float | None = None
    high: float | None = None
    level: float | None = None      # the two-sided confidence level of [low, high] at this look
    look: int = 1
    max_looks: int = 1
    alpha_spent: float = 0.0        # by the end of this look, of the design's alpha
    final: bool = False             # no look follows (the last, or the budget was spent): all alpha is spent
    needs: dict[str, int] = field(default_factory=dict)   # point -> more repetitions for a decision
    parts: list = field(default_factory=list)             # the points: [key, coef, var, n, lost_df]
    rule: dict = field(default_factory=dict)              # the Rule it was decided by (claims.json: to pool runs)

    def to_dict(self) -> dict:
        return asdict(self)


def plan(points, design: Design = Design()) -> dict:
    """The first pass: k0 repetitions of every point (each claim's first look needs a spread at every point)."""
    return {p: design.k0 for p in points}


def t_quantile(level: float, df: float) -> float:
    """Student's t quantile of a two-sided level (scipy's ufunc: the allocation loop asks it often; scipy.special
    rather than scipy.stats, the same quantile: scipy.stats takes 1.6 s to import here, about a minute in a TCG
    guest, where every run computes its intervals)."""
    global _stdtrit
    if _stdtrit is None:
        from scipy.special import stdtrit as _stdtrit   # lazy: see Design.spent
    return float(_stdtrit(df, 1 - (1 - level) / 2))


@lru_cache(maxsize=64)
def norm_quantile(p: float) -> float:
    from scipy.special import ndtri   # lazy: see Design.spent
    return float(ndtri(p))


def decide(e: float, low: float, high: float, rule: Rule) -> str:
    """The verdict of an interval [low, high] around e (see the module's docstring)."""
    if rule.kind == "within":
        if -rule.tol <= low and high <= rule.tol:
            return "holds"
        return "fails" if low > rule.tol or high < -rule.tol else "undecided"
    m = rule.margin
    if m > 0 and -m < low and high < m:
        return "no-difference"
    if low > 0 or (not rule.strict and low >= 0):
        return "holds"
    return "fails" if high < 0 else "undecided"


def judge(est: Estimate, rule: Rule, look: int = 1, design: Design = Design(), final: bool = False
          ) -> Judgement:
    """A claim's verdict at `look` (1-based) of design.max_looks, on its estimate e (see the module docstring).
    final: no look follows (the budget is spent), so this one spends what is left of alpha."""
    look = min(max(look, 1), design.max_looks)
    final = final or look == design.max_looks
    out = Judgement("undecided", "", est.mean, look=look, max_looks=design.max_looks,
                    alpha_spent=design.alpha if final else design.spent(look), final=final,
                    parts=[[p.key, p.coef, p.var, p.n, p.lost_df] for p in est.parts], rule=asdict(rule))
    short = [p for p in est.parts if p.n < 2]
    if short:
        out.needs = {p.key: 2 - p.n for p in short}
        out.basis = (f"no interval: {', '.join(f'{p.key} has {p.n} repetition' for p in short)}; needs at least 2 "
                     f"at each point it reads")
        return out
    level = 1 - design.nominal(look, final)
    # points whose repetitions all agree get an exact bound of their own (analysis/flat.py), and so do shares
    # of repetitions (analysis/binary.py); the look's alpha is shared between them and the t interval of the
    # other points (Bonferroni), so the sum covers
    binary = [p for p in est.parts if p.binary]
    flat = [p for p in est.parts if p.var == 0 and not p.binary]
    rest = Estimate(est.mean, tuple(p for p in est.parts if p.var > 0 and not p.binary))
    spread = bool(rest.parts)
    shares = max(1, len(flat) + len(binary) + spread)   # the t interval's share and one an exact point
    share = (1 - level) / shares
    half = t_quantile(1 - share, rest.df) * rest.se if rest.se > 0 else 0.0
    down, up = (a + b for a, b in zip(flatpart.widths(flat, share), binarypart.widths(binary, share)))
    out.low, out.high, out.level = est.mean - half - down, est.mean + half + up, level
    # the mean cannot leave the quantity's range, so an interval cut to it covers as often (loss below 0: a
    # t interval over one repetition with losses and two without)
    lo, hi = est.bounds
    cut = (lo is not None and out.low < lo) or (hi is not None and out.high > hi)
    out.low, out.high = max(out.low, -math.inf if lo is None else lo), min(out.high, math.inf if hi is None else hi)
    out.verdict = decide(est.mean, out.low, out.high, rule)
    if not est.parts:   # constants only (a model's predictions): nothing to estimate
        out.basis = f"no spread: {est.why or 'constants'}"
        return out
    adjusted = [p.key for p in rest.parts if p.lost_df > 1]
    out.basis = f"{100 * level:.4g} % interval [{fmt(out.low)}, {fmt(out.high)}]" + (
        f", t over repetitions (n ≥ {est.n})" if spread else "") + (
        f", adjusted for the loss drawn at {', '.join(adjusted)} (control variate, n - 2 df)" if adjusted else "") + (
        ", cut to the quantity's range" if cut else "")
    if rule.kind == "sided" and rule.margin > 0:
        out.basis += f", margin ±{fmt(rule.margin)}"
    if flat or binary:
        out.basis += "; " + "; ".join([flatpart.text(p, share) for p in flat]
                                      + [binarypart.text(p, share) for p in binary])
    if out.verdict == "undecided":
        # what the next look would need; after a final one, what one look at the whole alpha would
        nxt = design.alpha if final else design.nominal(look + 1, look + 1 == design.max_looks)
        if rule.kind == "sided" and rule.margin == 0 and not final:
            # without a margin the only effect size is the observed one, and a sample size chosen from an
            # observed effect inflates the error rate (the next look is taken mostly on data picked for
            # looking large): the next look doubles every point instead, a schedule no data chose
            out.needs = _doubled(est)
            out.basis += (f"; the next look doubles the repetitions (no margin to plan for): "
                          f"{', '.join(f'{n} at {k}' for k, n in out.needs.items())}")
        elif target_met(est, rule, nxt, design.power):
            # the spread already meets the planned target, so the difference lies near a boundary (the
            # tolerance's edge, or between 0 and the margin), where no planned size is sure to decide; without
            # this the claim got nothing more (study 001's eq1-/eq2-smooth, undecided in every run). Doubling is
            # again a schedule no observed difference chose
            out.needs = _doubled(est)
            out.basis += (f"; its spread meets the planned target but the interval straddles a boundary: the next "
                          f"look doubles the repetitions: {', '.join(f'{n} at {k}' for k, n in out.needs.items())}")
        elif spread:
            out.needs = needs(est, rule, nxt, design.power)
            out.basis += "; " + _needs_text(out.needs, rule)
        room = (rule.tol if rule.kind == "within" else rule.margin) / 2
        more, said = flatpart.needs([p for p in flat if p.key not in out.needs], room,
                                    nxt / shares, MORE_CAP)
        out.needs.update(more)
        out.basis += said
        # a share's exact interval narrows with n whatever the repetitions read: doubling, a schedule no data
        # chose (its width from the margin alone would ask for hundreds at a margin of a few per cent)
        more = {p.key: p.n for p in binary if p.key not in out.needs}
        if more:
            out.needs.update(more)
            out.basis += f"; the next look doubles {', '.join(f'{k} ({n} more)' for k, n in more.items())}"
    return out


def _needs_text(need: dict[str, int], rule: Rule) -> str:
    if not need:
        if rule.kind == "sided" and rule.margin == 0:
            return "the means are equal and the claim has no margin: no number of repetitions decides it"
        return f"more than {MORE_CAP} repetitions per point would be needed"
    total = sum(by_unit(need).values())   # a PAUSE point's baseline runs in its pairs: not counted twice
    where = ", ".join(f"{n} at {k}" for k, n in need.items())
    at = " at the observed difference" if rule.kind == "sided" and rule.margin == 0 else ""
    return f"needs ~{total} more repetition(s) for {100 * POWER:.0f} % power{at} ({where})"


def target_se(e: float, rule: Rule, alpha: float, power: float, df: float) -> float | None:
    """The standard error at which a decision is likely (`power`) at two-sided level alpha. With a margin: a
    true difference of the margin shows as holds/fails, and none as no-difference (the latter, a two-sided
    requirement, sets it: z at (1 + power) / 2); within: the same with the tolerance. Both rest on the spread
    alone, never on the observed difference. Without a margin the observed difference is the only effect
    size there is (reported, not planned on: see judge)."""
    t = t_quantile(1 - alpha, df)
    if rule.kind == "within":
        delta, z = rule.tol, norm_quantile((1 + power) / 2)
    elif rule.margin > 0:
        delta, z = rule.margin, norm_quantile((1 + power) / 2)
    else:
        delta, z = abs(e), norm_quantile(power)
    return delta / (t + z) if delta > 0 else None


def _doubled(est: Estimate) -> dict[str, int]:
    """Every point's repetitions once more: those with a spread, and those that agree within known bounds (their
    bound narrows with more)."""
    return {p.key: p.n for p in est.parts if p.var > 0 or None not in p.bounds}


def _se_met(est: Estimate, rule: Rule, alpha: float, power: float, n: dict[str, int]) -> bool:
    """Whether the estimate's standard error with n[point] repetitions (Welch-Satterthwaite df) meets
    target_se."""
    parts = [p for p in est.parts if p.var > 0]
    var = [p.coef ** 2 * p.var / n[p.key] for p in parts]
    den = sum(v * v / (n[p.key] - p.lost_df) for v, p in zip(var, parts))
    want = target_se(est.mean, rule, alpha, power, sum(var) ** 2 / den if den > 0 else math.inf)
    return want is not None and math.sqrt(sum(var)) <= want


def target_met(est: Estimate, rule: Rule, alpha: float, power: float = POWER) -> bool:
    """Whether the repetitions already give the target standard error (see target_se)."""
    parts = [p for p in est.parts if p.var > 0]
    return bool(parts) and _se_met(est, rule, alpha, power, {p.key: p.n for p in parts})


def needs(est: Estimate, rule: Rule, alpha: float, power: float = POWER) -> dict[str, int]:
    """More repetitions per point for the target standard error, the fewest total that reach it. They go to
    the points with the fewest repetitions first (ties: where they cut the variance most), never by the
    points' observed variances alone: allocating by those (Neyman) starves the point whose few repetitions
    happened to agree, keeps its variance underestimated, and took a look's error rate from 1.6 % to 3.8 % in
    simulation. {} when MORE_CAP more per point would not do, the target is undefined or already met."""
    parts = [p for p in est.parts if p.var > 0]
    if not parts:
        return {}
    start = {p.key: p.n for p in parts}

    def enough(total: int) -> dict[str, int] | None:
        n = _fill(start, total, parts)
        return n if _se_met(est, rule, alpha, power, n) else None

    hi = MORE_CAP * len(start)
    if enough(hi) is None:
        return {}
    if target_met(est, rule, alpha, power):   # nothing more planned: judge doubles such a claim instead
        return {}
    lo = 0   # enough(lo) fails; bisect for the least total that is enough
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) is not None else (mid, hi)
    n = enough(hi)
    return {k: n[k] - start[k] for k in start if n[k] > start[k]}


def _fill(start: dict[str, int], total: int, parts) -> dict[str, int]:
    """`total` more repetitions spread over the points, raising the fewest first (water-filling)."""
    n = dict(start)
    weight: dict[str, float] = {}
    for p in parts:
        weight[p.key] = weight.get(p.key, 0.0) + p.coef ** 2 * p.var
    left = total
    while left > 0:
        low = min(n.values())
        lows = sorted((k for k in n if n[k] == low), key=lambda k: -weight[k])
        above = min((v for v in n.values() if v > low), default=None)
        step = left // len(lows) if above is None else min(above - low, left // len(lows))
        if step == 0:
            for k in lows[:left]:
                n[k] += 1
            break
        for k in lows:
            n[k] += step
        left -= step * len(lows)
    return n


def stopped_at(looks: list[dict], before: int | None = None) -> dict[str, int]:
    """Each claim's first look that decided it (STOPS), of the loop's recorded looks before look `before` (all:
    None). The union bound covers the verdict of any one look, so reporting the first decision keeps the error
    rate, and it is the verdict the allocation acted on: a decided claim is given no more repetitions."""
    out: dict[str, int] = {}
    for entry in looks:
        if before is not None and entry["look"] >= before:
            break
        for cid, verdict in entry["verdicts"].items():
            if verdict in STOPS:
                out.setdefault(cid, entry["look"])
    return out


def held(records: list[dict], looks: list[dict], look: int) -> list[dict]:
    """Claim records (Verdict.to_dict) judged at `look`, each claim an earlier look decided replaced by that look's
    record (the loop keeps it in its entry's "judged"), with what `look` read beside it ("later")."""
    early = stopped_at(looks, look)
    out = []
    for r in records:
        k = early.get(r["id"])
        kept = (looks[k - 1].get("judged") or {}).get(r["id"]) if k else None
        if kept is None:   # a loop recorded before claims stopped (no "judged"): its last look, as then
            out.append(r)
            continue
        later = {f: r.get(f) for f in ("look", "verdict", "measured", "interval", "repetitions")}
        out.append({**kept, "basis": f"{kept['basis']}; stopped at look {k} (look {look} read {r['verdict']}: "
                                     f"{r['measured']})", "later": later})
    return out
