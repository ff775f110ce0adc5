"""A claim's verdict on measured summaries (the claims themselves: analysis/claims.py), from independent
repetitions only (analysis/samples.py reads them, analysis/sequential.py judges):

    holds           true, and the interval over repetitions says it is not chance
    fails           false beyond that interval
    no-difference   the interval lies inside ±the claim's margin (equivalence: two one-sided tests)
    undecided       not enough repetitions: the basis says how many more, at which points
    not-applicable  a point it reads was not run (--quick runs one point per spec), or failed (a point the
                    study's --budget ended before it ran, or whose every repetition was left out, leaves the claim
                    undecided instead: it applies, and was not measured)

A quantity at a point is one value per repetition (the repetition's mean over its measured intervals): never
batch means within one run, so one repetition has no interval and its claims are undecided. Repetitions whose
fidelity is not ok, that the kernel's BPF fault touched, whose collector disagrees with the workload's count,
or that a late sampler made unreliable are left out, each with its reason in the verdict's `excluded`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from .claims import (JAIN, MODEL_METRICS, Bound, Claim, Compare, Quantity, Ratio, SameTrend, Trend, Within,
                     quantities)
from . import metric_table, settling
from . import readings as rd
from .params import matches, same_param
from .claims import Diff as DiffExpr
from .samples import Cut, Estimate, NotRun, Unmeasured, constant, diff, fmt, from_reps, not_run, ratio, scale, usable
from .sequential import Design, Judgement, Rule, judge

VERDICTS = ("holds", "fails", "no-difference", "undecided", "not-applicable")
__all__ = ["Archive", "NotRun", "Verdict", "VERDICTS", "evaluate"]


@dataclass
class Archive:
    """What claims read: each spec's summary points (None: the spec was not run), and the Markov model's PAUSE
    gain for a point (analysis.report.models), given by the caller so this module needs no run directory; `cut`:
    each spec the study's --budget cut, with its pairs left to run; `adjust`: the metrics whose points' values are
    adjusted for the random loss their repetitions drew (analysis/samples.py)."""
    points: dict[str, list[dict] | None]
    pause_model: Callable[[str, dict], float | None] = lambda spec, point: None
    cut: dict[str, int] = field(default_factory=dict)
    adjust: frozenset[str] = frozenset()   # metrics adjusted for the loss drawn (samples.py; study adjust_for_loss)

    def missing(self, spec: str, what: str) -> NotRun:
        """What a spec's missing points mean: not run (not-applicable), or cut by the budget (undecided)."""
        if self.cut.get(spec):
            return Cut(f"{spec}: {what} before the budget ended ({self.cut[spec]} pair(s) of it left to run)")
        return NotRun(not_run(spec) if self.points.get(spec) is None else f"{spec}: {what}")

    def point(self, spec: str, at: dict) -> dict:
        pts = self.points.get(spec)
        if pts is None:
            raise self.missing(spec, "no point was run")
        found = [p for p in pts if matches(p.get("params", {}), at)]
        if not found:
            where = ", ".join(f"{k}={v}" for k, v in at.items()) or "its point"
            raise self.missing(spec, f"no point with {where} was run")
        if len(found) > 1:
            raise NotRun(f"{spec}: {len(found)} points match {at or 'no parameters'}; name the sweep's other "
                         f"parameters in `at`")
        return found[0]

    excluded: dict = field(default_factory=dict)   # (point, rep) -> reason, of the reads since reset()
    left_out: list = field(default_factory=list)   # the points of a series judged without them, since reset()
    unsettled: list = field(default_factory=list)  # the points read whose goodput still drifted (summary settling)

    def reset(self) -> None:
        self.excluded, self.left_out, self.unsettled = {}, [], []

    def value(self, expr, extra_at: dict | None = None) -> Estimate:
        if isinstance(expr, Ratio):
            return ratio(*self.each([lambda e=e: self.value(e, extra_at) for e in expr.ratio]))
        if isinstance(expr, DiffExpr):
            return diff(*self.each([lambda e=e: self.value(e, extra_at) for e in expr.diff]))
        q: Quantity = expr
        p = self.point(q.spec, {**q.at, **(extra_at or {})})
        return self._quantity(q, p)

    @staticmethod
    def each(reads: list[Callable[[], Estimate]]) -> list[Estimate]:
        """Every operand's value. Where some have no usable repetition, one Unmeasured names all their points, so
        a look asks the first pass again at each of them, not only at the first; a cut or a point not run ends
        it at once (its claim is undecided or not applicable whatever the others read)."""
        out, unmeasured = [], []
        for read in reads:
            try:
                out.append(read())
            except Cut:
                raise
            except Unmeasured as e:
                unmeasured.append(e)
        if unmeasured:
            raise Unmeasured("; ".join(str(e) for e in unmeasured), [k for e in unmeasured for k in e.points])
        return out

    def repetitions(self, key: str, reps: list[dict]) -> list[tuple[int, dict]]:
        """The repetitions a verdict may read; the others are recorded with their reasons."""
        good, bad = usable(reps)
        for number, why in bad:
            self.excluded[(key, number)] = why
        return good

    def _quantity(self, q: Quantity, p: dict) -> Estimate:
        where = f"{q.spec} point {p.get('index')}"
        key = f"{q.spec}#{p.get('index')}"
        if "system" not in p:   # every repetition failed: the point has its reasons, not metrics
            raise NotRun(f"{where} has no finished repetition ({p.get('failed') or 'failed'})")
        late = p.get("settling") or {"settled": True}   # analysis/settling.py: said beside the verdict, not in it
        if not late["settled"] and not any(u.startswith(key + " ") for u in self.unsettled):
            self.unsettled.append(f"{key} (its goodput {settling.change(late)})")
        if q.metric == "pause_model_gain":
            m = self.pause_model(q.spec, p)
            if m is None:
                raise NotRun(f"{where}: the Markov model was not computed")
            return constant(m, "a model's prediction")
        if q.metric == "pause_gain":   # G_pause / G_without - 1 in percent; the two sets of repetitions differ
            if not p.get("without_pause"):
                raise NotRun(f"{where}: no measured PAUSE gain (no run without PAUSE)")
            with_, without = self.each([
                lambda: self._per_rep(key, p, lambda r: rd.mean(r["system"].get("goodput_bps")), where),
                lambda: self._per_rep(f"{key}/baseline", p["without_pause"],
                                      lambda r: rd.mean(r["system"].get("goodput_bps")), where + " without PAUSE")])
            return scale(ratio(with_, without), 100.0, -100.0)
        flows = self._flows(q, p, where)
        # what one repetition's value can be (analysis/flat.py): the metric's range (Jain's over a subset of the
        # flows too), a model's throughput at least 0
        lo, hi = (0.0, None) if q.metric in MODEL_METRICS else metric_table.bounds(q.metric)
        if flows is not None and q.agg == "sum" and q.metric not in JAIN:   # a sum spans as many ranges
            lo, hi = (None if x is None else x * len(flows) for x in (lo, hi))
        if q.share:   # a part of the system's delivery (a subset of its flows), or unknown for other metrics
            lo, hi = (0.0, 1.0) if q.metric in ("goodput_bps", "throughput_bps") else (None, None)
        bounds = (lo, hi)
        if flows is None:
            get = lambda r: rd.mean(r["system"].get(q.metric))
        elif "." in q.metric:
            get = lambda r: rd.agg([rd.workload(r, i, q.metric) for i in flows], q.agg)
        elif q.metric == "mathis_bps":   # Eq. 5 per flow, at its own loss over the repetition and its own RTT
            get = lambda r: rd.agg([rd.mathis(r["flows"][i]) for i in flows], q.agg)
        elif q.metric in MODEL_METRICS:   # Eq. 1 per flow, at that repetition's loss and the flow's own RTT
            get = lambda r: rd.agg([rd.gaimd(r["flows"][i], q.law, rd.mean(r["system"].get("loss")))
                                    for i in flows], q.agg)
        elif q.metric in JAIN:   # over a subset of the flows: their index within each repetition
            get = lambda r: rd.jain([rd.mean(r["flows"][i].get(JAIN[q.metric])) for i in flows])
        else:
            get = lambda r: rd.agg([rd.mean(r["flows"][i].get(q.metric)) for i in flows], q.agg)
        if q.share:
            inner = get
            get = lambda r: rd.div(inner(r), rd.mean(r["system"].get("goodput_bps")))
        what = f"{q.metric} of {'the system' if flows is None else flows}"
        if q.phase is not None:   # the same reading over the on/off source's phase only (summary.by_phase)
            whole = get
            get = lambda r: whole({**r, **rd.phase(r, q.phase)})
            what += f" with the on/off source {q.phase}"
        if q.exceeds is not None:   # a Bernoulli trial per repetition: the point's mean is a share
            reading = get
            get = lambda r: rd.exceeds(reading(r), q.exceeds)
            what += f" exceeding {q.exceeds:g}"
            bounds = (0.0, 1.0)
        return self._per_rep(key, p, get, where, what, bounds, binary=q.exceeds is not None,
                             adjust=q.metric in self.adjust)

    def _per_rep(self, key: str, p: dict, get, where: str, what: str = "goodput", bounds=(None, None),
                 binary: bool = False, adjust: bool = False) -> Estimate:
        reps = p.get("repetitions")
        if not reps:
            raise NotRun(f"{where}: no repetitions recorded")
        values, drawn, usable_reps = {}, {}, self.repetitions(key, reps)
        for number, rep in usable_reps:
            try:
                v = get(rep)
            except (KeyError, IndexError, TypeError):
                v = None
            if v is None:
                self.excluded[(key, number)] = f"no value of {what}"
            else:
                values[number] = v
                d = rd.loss_drawn(rep) if adjust else None
                if d is not None:
                    drawn[number] = d
        if not values:   # spoiled repetitions: others may measure it; a value none of them has: not applicable
            why = f"{where}: no usable repetition ({'; '.join(sorted(set(self._reasons(key)))) or what})"
            raise Unmeasured(why, [key]) if len(usable_reps) < len(reps) else NotRun(why)
        return from_reps(key, values, bounds, binary, drawn)

    def _reasons(self, key: str) -> list[str]:
        return [why for (k, _), why in self.excluded.items() if k == key]

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
    margin: float = 0.0
    judgement: Judgement | None = None
    excluded: list = field(default_factory=list)   # [{point, rep, reason}] left out of this claim's values

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "judgement"}
        j = self.judgement
        # an unbounded end (a flat point whose quantity has no bound there: analysis/flat.py) is null
        out.update(interval=None if j is None or j.low is None else [_finite(j.low), _finite(j.high)],
                   level=None if j is None else j.level, look=None if j is None else j.look,
                   max_looks=None if j is None else j.max_looks,
                   alpha_spent=None if j is None else j.alpha_spent, final=None if j is None else j.final,
                   needs={} if j is None else j.needs, parts=[] if j is None else j.parts,
                   rule={} if j is None else j.rule,
                   # the usable repetitions each point it reads had at this look
                   repetitions={} if j is None else {key: n for key, _, _, n, *_ in j.parts})
        return out


def _first_pass_again(e: NotRun, look: int, design: Design, final: bool) -> Judgement | None:
    """An unmeasured point's claim, while a look may follow: the first pass's k0 repetitions asked there again (its
    attempts were spoiled: by a spell of steal, say, that may have passed), for the budget loop to fund."""
    if not isinstance(e, Unmeasured) or isinstance(e, Cut) or not e.points or final:
        return None
    return Judgement("undecided", str(e), math.nan, look=look, max_looks=design.max_looks, final=final,
                     needs={k: design.k0 for k in e.points})


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _rule(op: str, margin: float) -> Rule:
    return Rule("sided", 1 if op in (">", ">=") else -1, op in (">", "<"), margin)


def _signed(e: Estimate, want: int) -> Estimate:
    """e with its sign turned so that positive is what the claim says."""
    return e if want > 0 else scale(e, -1.0)


def _series(archive: Archive, expr, along: str, final: bool = True) -> list[tuple[Any, Estimate]]:
    """expr's value at each point along a swept path, in the sweep's order (the points' index order). A trend
    reads the whole axis: while a look follows (not final), a point none of whose repetitions was usable leaves
    the claim undecided and is measured again first; at the final look the measured points are judged and the
    basis names the ones left out."""
    specs = {q.spec for q in quantities(expr)}
    values = []
    for spec in sorted(specs):
        pts = archive.points.get(spec)
        if pts is None:
            raise archive.missing(spec, "no point was run")
        values += [p["params"][along] for p in sorted(pts, key=lambda p: p["index"]) if along in p.get("params", {})]
    seen = []
    for v in values:
        if not any(same_param(v, s) for s in seen):
            seen.append(v)
    out, unmeasured = [], []
    for v in seen:
        try:
            out.append((v, archive.value(expr, {along: v})))
        except Unmeasured as e:
            unmeasured.append(e)
        except NotRun:
            continue
    if len(out) < 2:   # the spec the budget cut, if one was, or a point that was not measured: undecided
        cut = sorted(specs, key=lambda s: not archive.cut.get(s))[0]
        # fewer than two points run (--quick) is no trend whatever their repetitions read (CI 2026-12-05: a
        # busy machine spoiled quick mode's one repetition and the claim read undecided)
        if len(out) + len(unmeasured) >= 2 and not archive.cut.get(cut):
            raise Unmeasured(f"fewer than two points along {along} have a usable repetition ({unmeasured[0]})",
                             [k for e in unmeasured for k in e.points])
        raise archive.missing(cut, f"fewer than two points along {along} were run")
    spoiled = [e for e in unmeasured if not isinstance(e, Cut)]
    if spoiled and not final:
        raise Unmeasured(f"{len(spoiled)} of {len(seen)} points along {along} have no usable repetition yet "
                         f"({spoiled[0]})", [k for e in spoiled for k in e.points])
    archive.left_out += [str(e) for e in unmeasured]
    return out


def slope(series: list[tuple[Any, Estimate]]) -> float:
    """The least-squares slope of the means against their position along the sweep."""
    ys = [v.mean for _, v in series]
    n = len(ys)
    xm, ym = (n - 1) / 2, sum(ys) / n
    return sum((i - xm) * (y - ym) for i, y in enumerate(ys)) / sum((i - xm) ** 2 for i in range(n))


def _trend(series: list[tuple[Any, Estimate]], sign: int, margin: float, look: int, design: Design,
           final: bool) -> Judgement:
    """Rises (sign 1) or falls (-1): the ends' difference judged, and the fitted slope of the means must agree
    with a holds or a fails (a claim only loses decisions by it, so the error rate stays what it was)."""
    first, last = series[0][1], series[-1][1]
    j = judge(_signed(diff(last, first), sign), Rule(want=sign, margin=margin), look, design, final)
    s = slope(series) * sign
    if (j.verdict == "holds" and s <= 0) or (j.verdict == "fails" and s >= 0):
        j.verdict = "undecided"
        j.basis += f"; the ends differ but the fitted slope goes {'against' if s < 0 else 'with'} the claim"
    return j


def _show(series: list[tuple[Any, Estimate]]) -> str:
    return " → ".join(f"{x}: {fmt(v.mean)}" for x, v in series)


def evaluate(claim: Claim, archive: Archive, look: int = 1, design: Design = Design(), final: bool = False
             ) -> Verdict:
    """A claim's verdict at `look` of the design (today's study run: one look, all of alpha)."""
    t = claim.test
    out = Verdict(claim.id, claim.paper, "not-applicable", "–", note=claim.note)
    archive.reset()
    try:
        if isinstance(t, Bound):
            v = archive.value(t.q)
            out.margin = t.margin_of(t.value)
            rule = _rule(t.op, out.margin)
            out.judgement = judge(_signed(scale(v, 1.0, -t.value), rule.want), rule, look, design, final)
            out.measured, out.values = f"{v} ({t.op} {t.value:g})", {"q": v.to_dict()}
        elif isinstance(t, Compare):
            a, b = archive.each([lambda: archive.value(t.a), lambda: archive.value(t.b)])
            out.margin = t.margin_of(b.mean)
            rule = _rule(t.op, out.margin)
            out.judgement = judge(_signed(diff(a, b), rule.want), rule, look, design, final)
            out.measured, out.values = f"{a} {t.op} {b}", {"a": a.to_dict(), "b": b.to_dict()}
        elif isinstance(t, Within):
            v = archive.value(t.q)
            tol = t.tol * abs(t.value)
            out.judgement = judge(scale(v, 1.0, -t.value), Rule("within", tol=tol), look, design, final)
            out.measured, out.values = f"{v} (value {t.value:g} ± {tol:.3g})", {"q": v.to_dict()}
        elif isinstance(t, Trend):
            series = _series(archive, t.q, t.along, final)
            out.margin = t.margin_of(series[0][1].mean)
            out.judgement = _trend(series, 1 if t.sign == "rises" else -1, out.margin, look, design, final)
            out.measured = _show(series)
            out.values = {"series": [[str(x), v.to_dict()] for x, v in series]}
        elif isinstance(t, SameTrend):
            a, b = _series(archive, t.a, t.along, final), _series(archive, t.b, t.along, final)
            sb = slope(b)
            if sb == 0:
                raise NotRun(f"b does not move along {t.along}")
            out.margin = t.margin_of(a[0][1].mean)   # a flat a (within it) does not follow b: no-difference
            out.judgement = _trend(a, 1 if sb > 0 else -1, out.margin, look, design, final)
            out.judgement.basis = f"b {'rises' if sb > 0 else 'falls'}; a: {out.judgement.basis}"
            out.measured = f"a: {_show(a)}; b: {_show(b)}"
            out.values = {"a": [[str(x), v.to_dict()] for x, v in a], "b": [[str(x), v.to_dict()] for x, v in b]}
        out.verdict, out.basis = out.judgement.verdict, out.judgement.basis
        if archive.left_out:
            out.basis += f"; judged without {len(archive.left_out)} point(s): {'; '.join(archive.left_out)}"
        if archive.unsettled:
            out.basis += (f"; read where goodput was still settling after the warm-up (a transient's mean): "
                          f"{'; '.join(archive.unsettled)}")
    except NotRun as e:
        out.verdict = "undecided" if isinstance(e, Unmeasured) else "not-applicable"
        out.basis, out.measured, out.judgement = str(e), "–", _first_pass_again(e, look, design, final)
    out.excluded = [{"point": k, "rep": r, "reason": why} for (k, r), why in sorted(archive.excluded.items())]
    return out
