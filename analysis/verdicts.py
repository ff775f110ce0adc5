"""A claim's verdict on measured summaries (the claims themselves: analysis/claims.py):

    holds           true, and the intervals say it is not chance
    fails           false beyond the intervals
    inconclusive    the means lean one way, the intervals cannot tell
    not-applicable  a point it reads was not run (--quick runs one point per spec), or has no value

A value without an interval (one repetition too short for batch means, a model's prediction) is judged by its
mean, and the verdict's `basis` says so: the table never hides that a verdict rests on means alone. Intervals of
two quantities combine by the delta method as if independent (they come from different runs or flows).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from .claims import JAIN, Bound, Claim, Compare, Diff, Quantity, Ratio, SameTrend, Trend, Within, quantities

VERDICTS = ("holds", "fails", "inconclusive", "not-applicable")

class NotRun(Exception):
    """A point a quantity reads is not in the archive, or has no value there (not-applicable, with the reason)."""


@dataclass(frozen=True)
class Value:
    mean: float
    half: float | None     # the confidence interval's half-width; None: no interval (`why`)
    why: str = ""

    def __str__(self) -> str:
        return _fmt(self.mean) + ("" if self.half is None else f" ± {_fmt(self.half)}")


def _fmt(x: float) -> str:
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.3g}M"
    if a >= 1e3:
        return f"{x / 1e3:.3g}k"
    return f"{x:.3g}"


def _entry_value(entry: dict | None, what: str) -> Value:
    """A summary metric entry ({mean, ci95, ci}) as a Value."""
    if not entry or entry.get("mean") is None:
        raise NotRun(f"{what} has no value")
    ci = entry.get("ci95")
    if ci and ci[0] is not None and ci[1] is not None:
        return Value(entry["mean"], (ci[1] - ci[0]) / 2)
    return Value(entry["mean"], None, (entry.get("ci") or {}).get("reason", "no interval"))


def _combine(values: list[Value], agg: str) -> Value:
    total = sum(v.mean for v in values)
    halves = [v.half for v in values]
    half = None if any(h is None for h in halves) else math.sqrt(sum(h * h for h in halves))
    why = next((v.why for v in values if v.half is None), "")
    if agg == "sum":
        return Value(total, half, why)
    return Value(total / len(values), None if half is None else half / len(values), why)


def ratio(a: Value, b: Value) -> Value:
    if b.mean == 0:
        raise NotRun("a ratio's denominator is 0")
    r = a.mean / b.mean
    if a.half is None or b.half is None:
        return Value(r, None, a.why or b.why)
    rel = math.hypot(a.half / a.mean if a.mean else 0.0, b.half / b.mean)
    return Value(r, abs(r) * rel if a.mean else abs(a.half / b.mean))


def diff(a: Value, b: Value) -> Value:
    half = None if a.half is None or b.half is None else math.hypot(a.half, b.half)
    return Value(a.mean - b.mean, half, a.why or b.why)


def same_param(given, wanted) -> bool:
    """A sweep parameter's value in the archive against the one a claim names: equal as written, or as numbers."""
    if given == wanted or str(given) == str(wanted):
        return True
    try:
        return float(given) == float(wanted)
    except (TypeError, ValueError):
        return False


@dataclass
class Archive:
    """What claims read: each spec's summary points (None: the spec was not run), and the Markov model's PAUSE
    gain for a point (analysis.report.models), given by the caller so this module needs no run directory."""
    points: dict[str, list[dict] | None]
    pause_model: Callable[[str, dict], float | None] = lambda spec, point: None

    def point(self, spec: str, at: dict) -> dict:
        pts = self.points.get(spec)
        if pts is None:
            raise NotRun(f"spec {spec} was not run")
        found = [p for p in pts if all(k in p.get("params", {}) and same_param(p["params"][k], v)
                                       for k, v in at.items())]
        if not found:
            where = ", ".join(f"{k}={v}" for k, v in at.items()) or "its point"
            raise NotRun(f"{spec}: no point with {where} was run")
        if len(found) > 1:
            raise NotRun(f"{spec}: {len(found)} points match {at or 'no parameters'}; name the sweep's other "
                         f"parameters in `at`")
        return found[0]

    def value(self, expr, extra_at: dict | None = None) -> Value:
        if isinstance(expr, Ratio):
            return ratio(*(self.value(e, extra_at) for e in expr.ratio))
        if isinstance(expr, Diff):
            return diff(*(self.value(e, extra_at) for e in expr.diff))
        q: Quantity = expr
        at = {**q.at, **(extra_at or {})}
        p = self.point(q.spec, at)
        v = self._quantity(q, p)
        if q.share:
            v = ratio(v, _entry_value(p["system"].get("goodput_bps"), f"{q.spec}: system goodput"))
        return v

    def _quantity(self, q: Quantity, p: dict) -> Value:
        where = f"{q.spec} point {p.get('index')}"
        if "system" not in p:   # every repetition failed: the point has its reasons, not metrics
            raise NotRun(f"{where} has no finished repetition ({p.get('failed') or 'failed'})")
        if q.metric == "pause_gain":
            g = p.get("pause_gain") or {}
            if g.get("percent") is None:
                raise NotRun(f"{where}: no measured PAUSE gain")
            lo, hi = (g.get("ci95") or [None, None])[:2]
            has = g.get("ci_method") not in (None, "none") and lo is not None and hi is not None and hi > lo
            return Value(g["percent"], (hi - lo) / 2 if has else None, "" if has else g.get("reason") or "no interval")
        if q.metric == "pause_model_gain":
            m = self.pause_model(q.spec, p)
            if m is None:
                raise NotRun(f"{where}: the Markov model was not computed")
            return Value(m, None, "a model's prediction")
        flows = self._flows(q, p, where)
        if "." in q.metric:
            return _combine([_workload_value(p, i, q.metric, where) for i in flows], q.agg)
        if flows is None:
            return _entry_value(p["system"].get(q.metric), f"{where}: system {q.metric}")
        if q.metric in JAIN:   # over a subset of the flows: their means' index (no interval: one number per point)
            xs = [_entry_value(p["flows"][i].get(JAIN[q.metric]), f"{where}: flow {i}").mean for i in flows]
            if not any(xs):
                raise NotRun(f"{where}: flows {flows} carried nothing")
            return Value(sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)), None,
                         f"Jain over flows {flows}' mean {JAIN[q.metric]}")
        return _combine([_entry_value(p["flows"][i].get(q.metric), f"{where}: flow {i} {q.metric}")
                         for i in flows], q.agg)

    @staticmethod
    def _flows(q: Quantity, p: dict, where: str) -> list[int] | None:
        if q.flows == "system":
            return None
        if isinstance(q.flows, dict):
            out = [i for i, f in enumerate(p["flows"]) if f.get("cc") == q.flows["cc"]]
            if not out:
                raise NotRun(f"{where}: no flow with cc {q.flows['cc']}")
            return out
        bad = [i for i in q.flows if not 0 <= i < len(p["flows"])]
        if bad:
            raise NotRun(f"{where}: no flow {bad[0]} (the point has {len(p['flows'])})")
        return list(q.flows)


def _workload_value(p: dict, flow: int, metric: str, where: str) -> Value:
    """KIND.KEY[.STAT] of one flow, from each repetition's workload record; t over the repetitions when there
    are two or more."""
    kind, *path = metric.split(".")
    xs = []
    for rep in p.get("repetitions", []):
        rec = next((r for r in rep.get(kind) or [] if r.get("flow") == flow), None)
        for key in path:
            rec = rec.get(key) if isinstance(rec, dict) else None
        if isinstance(rec, (int, float)):
            xs.append(float(rec))
    if not xs:
        raise NotRun(f"{where}: flow {flow} has no {metric}")
    from .stats import over_runs   # lazy: numpy and scipy for the t quantile
    ci = over_runs(xs)
    if ci.half_width is None:
        return Value(ci.mean, None, ci.reason or "one repetition")
    return Value(ci.mean, ci.half_width)


# --- verdicts ----------------------------------------------------------------------------------------------

@dataclass
class Verdict:
    id: str
    paper: str
    verdict: str
    measured: str
    basis: str = ""
    note: str = ""
    values: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _sided(d: float, half: float | None, op: str) -> tuple[str, str]:
    """d = left - right of `left op right`: the verdict and its basis."""
    want = 1 if op in (">", ">=") else -1
    strict = op in (">", "<")
    true = (d * want > 0) or (not strict and d == 0)
    if half is None:
        return ("holds" if true else "fails"), "means only (no confidence interval)"
    if d * want - half > 0 or (not strict and d * want - half == 0):
        return "holds", "beyond the confidence interval"
    if d * want + half < 0:
        return "fails", "beyond the confidence interval"
    return "inconclusive", f"the interval covers both sides (means {'hold' if true else 'fail'})"


def _series(archive: Archive, expr, along: str) -> list[tuple[Any, Value]]:
    """expr's value at each point along a swept path, in the sweep's order (the points' index order)."""
    specs = {q.spec for q in quantities(expr)}
    values = []
    for spec in sorted(specs):
        pts = archive.points.get(spec)
        if pts is None:
            raise NotRun(f"spec {spec} was not run")
        values += [p["params"][along] for p in sorted(pts, key=lambda p: p["index"]) if along in p.get("params", {})]
    seen = []
    for v in values:
        if not any(same_param(v, s) for s in seen):
            seen.append(v)
    out = []
    for v in seen:
        try:
            out.append((v, archive.value(expr, {along: v})))
        except NotRun:
            continue
    if len(out) < 2:
        raise NotRun(f"fewer than two points along {along} were run")
    return out


def _slope(series: list[tuple[Any, Value]]) -> float:
    """The least-squares slope of the means against their position along the sweep."""
    ys = [v.mean for _, v in series]
    n = len(ys)
    xm, ym = (n - 1) / 2, sum(ys) / n
    return sum((i - xm) * (y - ym) for i, y in enumerate(ys)) / sum((i - xm) ** 2 for i in range(n))


def _trend_verdict(series: list[tuple[Any, Value]], sign: int) -> tuple[str, str]:
    """Rises (sign 1) or falls (-1): the fitted slope's sign, and the ends' difference beyond their intervals."""
    first, last = series[0][1], series[-1][1]
    d = diff(last, first)
    s = _slope(series)
    if d.half is None:
        return ("holds" if s * sign > 0 and d.mean * sign > 0 else "fails"), "means only (no confidence interval)"
    if s * sign > 0 and d.mean * sign > d.half:
        return "holds", "the ends differ beyond their intervals"
    if s * sign < 0 and -d.mean * sign > d.half:
        return "fails", "the ends differ the other way beyond their intervals"
    lean = "with" if s * sign > 0 else "against"
    return "inconclusive", f"the ends are within their intervals (slope {lean} the claim)"


def _show(series: list[tuple[Any, Value]]) -> str:
    return " → ".join(f"{x}: {_fmt(v.mean)}" for x, v in series)


def evaluate(claim: Claim, archive: Archive) -> Verdict:
    t = claim.test
    out = Verdict(claim.id, claim.paper, "not-applicable", "–", note=claim.note)
    try:
        if isinstance(t, Bound):
            v = archive.value(t.q)
            out.verdict, out.basis = _sided(v.mean - t.value, v.half, t.op)
            out.measured, out.values = f"{v} ({t.op} {t.value:g})", {"q": v.__dict__}
        elif isinstance(t, Compare):
            a, b = archive.value(t.a), archive.value(t.b)
            d = diff(a, b)
            out.verdict, out.basis = _sided(d.mean, d.half, t.op)
            out.measured, out.values = f"{a} {t.op} {b}", {"a": a.__dict__, "b": b.__dict__}
        elif isinstance(t, Within):
            v = archive.value(t.q)
            tol = t.tol * abs(t.value)
            off = abs(v.mean - t.value)
            if v.half is None:
                out.verdict, out.basis = ("holds" if off <= tol else "fails"), "means only (no confidence interval)"
            elif off + v.half <= tol:
                out.verdict, out.basis = "holds", "the whole interval is within the tolerance"
            elif off - v.half > tol:
                out.verdict, out.basis = "fails", "the whole interval is outside the tolerance"
            else:
                out.verdict, out.basis = "inconclusive", "the interval straddles the tolerance's edge"
            out.measured, out.values = f"{v} (value {t.value:g} ± {tol:.3g})", {"q": v.__dict__}
        elif isinstance(t, Trend):
            series = _series(archive, t.q, t.along)
            out.verdict, out.basis = _trend_verdict(series, 1 if t.sign == "rises" else -1)
            out.measured = _show(series)
            out.values = {"series": [[str(x), v.__dict__] for x, v in series]}
        elif isinstance(t, SameTrend):
            a, b = _series(archive, t.a, t.along), _series(archive, t.b, t.along)
            sb = _slope(b)
            if sb == 0:
                raise NotRun(f"b does not move along {t.along}")
            out.verdict, out.basis = _trend_verdict(a, 1 if sb > 0 else -1)
            out.basis = f"b {'rises' if sb > 0 else 'falls'}; a: {out.basis}"
            out.measured = f"a: {_show(a)}; b: {_show(b)}"
            out.values = {"a": [[str(x), v.__dict__] for x, v in a], "b": [[str(x), v.__dict__] for x, v in b]}
    except NotRun as e:
        out.verdict, out.basis, out.measured = "not-applicable", str(e), "–"
    return out
