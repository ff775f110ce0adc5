"""A study's repetitions spent where its claims are undecided (`ccrig study run NAME --budget 30m`).

    first pass   k0 repetitions of each point a claim reads, the spec's own if more; the spec's own at a figure's
    look 1       every claim judged (analysis/verdicts.py at look 1 of the design)
    then, while some claim is undecided, a look is left and the budget buys a repetition:
                 allocation.next_pairs (a step for every claim, then whole claims, the cheapest to decide first,
                 then the most informative points, and in the last round the rest to the undecided claims'
                 points, fewest repetitions first, within the budget left shared among the rounds still to come,
                 at each spec's cost per pair measured so far times the last round's pace: its time over what its
                 pairs cost at those costs) raises those points' repetitions in study.json, the specs run again
                 (each run directory gains repetitions in place: runner.py extends its seeded order), and every
                 claim not yet decided is judged at the next look; `final` when the budget will not buy another
                 round or it is the design's last look (it then spends all of alpha that is left)
    stopped      the reason, in study.json's "loop", with every look's verdicts, pairs added and time spent

study.json is the shared state: each spec's record says how many repetitions each of its points wants
("repetitions": {index: n}), so a spec that runs elsewhere (the vm's guest runs `ccrig study run --resume DIR
--specs ...` on the same study.json) gets its extra repetitions without another argument. The loop itself runs
only in the outer study; `--resume DIR` continues it where it stopped (the time spent is in study.json).

Without --budget the same loop makes one look with the whole error rate (a design of one look) after the
first pass. Budget spent counts the study's wall time in this loop, the first pass included; the rounds leave
what the claims and figures after the loop take (reserve(): 3.5 s a point), so that the command ends within its
--budget; the last round is planned beyond what is left (LAST_ROUND_FILL) and cut where the budget ends.

Why the stated error rate holds (sequential.py's union bound over looks): every look judges every claim not yet
decided at that look's increment of alpha, and a claim's verdict is that of the first look that decided it; a wrong
holds/fails reported is a wrong decision at some look, so its chance is at most the sum of the increments taken,
alpha. When a non-final look finds nothing affordable to add, the loop judges that same look again as final (alpha
minus what the earlier looks spent): the same data at a wider level only adds decisions, and no look follows it, so
the increments still sum to alpha. After a final look none comes: --resume with a new --budget only extends a loop
that was interrupted. Which points get more comes from next_pairs (the spread and the margin, never the observed
difference), as in the simulation of tests/unit/test_budget.py.
"""
from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ccrig.analysis.allocation import next_pairs
from ccrig.analysis.sequential import STOPS, Design, plan, stopped_at
from ccrig.errors import field_error
from ccrig.experiments.run import fidelity

LOOKS = 3          # looks at most with --budget: the design tests/unit/test_sequential.py simulates
K0 = Design.k0     # the first pass's repetitions per point, as the design declares it (a study.yaml may say k0)
DEFAULT_COST_S = 60.0   # a pair's cost before any was measured (no spec has finished one yet)
DECIDED = ("holds", "fails", "no-difference", "not-applicable")
# What follows the loop inside the same --budget: the claims and each run's figures. Study 001 runs G, H and I (39
# points, 2026-11-29) drew them in 94, 99 and 120 s after their loops: 2.4-3.1 s a point
REPORT_S_PER_POINT = 3.5
# The last round is planned this much beyond what is left: time it leaves is lost, and the budget cuts one that
# would overrun (engine.Until). The 53 last rounds of the runs in experiments/studies took 0.32-2.03 of their plan
# (median 1.00, 12 under 0.9); planned a tenth short (until 2026-12-06) study 001's run AT left 4.9 of 30 minutes
LAST_ROUND_FILL = 1.25


def parse_budget(text: str) -> float:
    """--budget: seconds from 900, 900s, 30m, 1.5h or 1h30m; more than 0 and at most a week."""
    m = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text or "")
    h, mi, s = (float(g) if g else 0.0 for g in m.groups()) if m and any(m.groups()) else (0.0, 0.0, 0.0)
    seconds = 3600 * h + 60 * mi + s
    if not 0 < seconds <= 7 * 86400:
        raise field_error("--budget", text, "a duration from 1s to 7 days such as 900 (seconds), 30m, 1h or 1h30m")
    return seconds


def design(k0: int, budget: bool) -> Design:
    """The study's sequential design: several looks with a budget, else one look spending all of alpha."""
    return Design(max_looks=LOOKS if budget else 1, k0=k0)


def judged_at(state: dict, look: int | None = None, final: bool | None = None, d: Design | None = None
              ) -> tuple[Design, int, bool]:
    """The design, look and finality a study directory is judged at: as given, else its loop's last look (a
    study directory from before the loop: one look spending all of alpha)."""
    loop = state.get("loop") or {}
    if d is None:
        k = loop.get("design") or {}
        d = Design(alpha=k.get("alpha", 0.05), max_looks=k.get("max_looks", 1), k0=k.get("k0", 1),
                   power=k.get("power", Design.power))
    last = (loop.get("looks") or [{}])[-1]
    return d, look or last.get("look", 1), last.get("final", True) if final is None else final


def key(spec: str, index: int) -> str:
    return f"{spec}#{index}"


def parse_key(point: str) -> tuple[str, int]:
    """SPEC#INDEX or SPEC#INDEX/baseline (PAUSE's run without it: the point's own repetitions) -> (spec, index)."""
    spec, rest = point.rsplit("#", 1)
    return spec, int(rest.split("/", 1)[0])


def points_of(points: dict) -> dict[str, dict[int, tuple[int, int]]]:
    """spec -> {point index: (the spec's repetitions, pairs per repetition: 2 for a PAUSE point, whose run
    without PAUSE is a pair of its own)}, of the specs' points as the study runs them (spec -> specmod.points)."""
    return {spec: {p.index: (p.experiment.repetitions, 2 if p.experiment.pause_gain else 1) for p in pts}
            for spec, pts in points.items()}


def first_pass(points: dict[str, dict[int, tuple[int, int]]], d: Design, read: set) -> dict[str, dict[str, int]]:
    """Each spec's points' repetitions for the first pass (points: points_of): k0 (sequential.plan) or the spec's
    own if more where a claim reads the point (read: Study.reads), else the spec's own. Keys as in study.json."""
    want = plan([key(s, i) for s, i in read], d)
    return {s: {str(i): max(want.get(key(s, i), n), n) for i, (n, _) in pts.items()} for s, pts in points.items()}


def reserve(points: dict[str, dict[int, tuple[int, int]]]) -> float:
    """The seconds kept for the claims and figures after the loop (points: points_of), so that --budget bounds
    the command's wall time, not only the loop's."""
    return REPORT_S_PER_POINT * sum(pairs for pts in points.values() for _, pairs in pts.values())


def given_time(planned: dict, state: dict) -> dict:
    """The specs (spec -> (path, raw, exp)), each with the most repetitions study.json wants at any of its points
    as its own: what a run elsewhere is given time for (its guest's timeout counts the spec's repetitions)."""
    out = {}
    for spec, (path, raw, exp) in planned.items():
        most = max(map(int, (state["specs"][spec].get("repetitions") or {}).values()), default=exp.repetitions)
        out[spec] = (path, raw, exp.model_copy(update={"repetitions": max(most, exp.repetitions)}))
    return out


def raise_wants(state: dict, pairs: list[tuple[str, int]]) -> dict[str, dict[str, int]]:
    """The points' new repetition counts in study.json (each spec's "repetitions"), n more at each point, and
    every spec that gains any marked pending. Returns {spec: {index: n more}}."""
    added: dict[str, dict[str, int]] = {}
    for point, more in pairs:
        spec, index = parse_key(point)
        # a PAUSE point's baseline has the point's repetitions: the larger need of the two sets it
        added.setdefault(spec, {})[str(index)] = max(added.get(spec, {}).get(str(index), 0), more)
    for spec, more in added.items():
        rec = state["specs"][spec]
        wants = rec.setdefault("repetitions", {})
        for index, n in more.items():
            wants[index] = int(wants.get(index, 1)) + n
        rec["status"] = "pending"
    return added


def pairs_of(run_dir: Path | None) -> tuple[int, int]:
    """(complete, begun but not complete) pairs in a run directory: a (point, repetition) pair is complete when
    each of its variants' repetition.json is there (points/NNN/repK, or points/NNN/VARIANT/repK: a PAUSE gain's
    with and without). A pair, not a variant, is what the loop adds and what a cost is per: counted by variant,
    study 000's pairs cost half their time, and its second look ran 9 min past a 30 min budget."""
    if run_dir is None or not (run_dir / "points").is_dir():
        return 0, 0
    done_of: dict[tuple[str, str], bool] = {}
    for d in (run_dir / "points").glob("[0-9][0-9][0-9]/**/rep*"):
        if d.is_dir():
            key = (d.relative_to(run_dir / "points").parts[0], d.name)
            done_of[key] = done_of.get(key, True) and (d / "repetition.json").is_file()
    done = sum(done_of.values())
    return done, len(done_of) - done


def begun(study_dir: Path, plan: tuple | None) -> Path | None:
    """The run directory a spec running in this process has made (runs/NAME-STAMP-PID), before study.json names
    it (at the run's end): the display counts its pairs as they finish."""
    found = sorted((study_dir / "runs").glob(f"{plan[2].name}-*-{os.getpid()}")) if plan else []
    return found[-1] if found else None


def costs(state: dict, run_dirs: dict[str, Path | None]) -> dict[str, float]:
    """Each spec's wall seconds per pair so far (its runs' time over its complete pairs: set-up, teardown and a
    guest's boot included, side by side already divided in); a spec with none yet, the others' mean."""
    out = {}
    for spec, rec in state["specs"].items():
        done, _ = pairs_of(run_dirs.get(spec))
        if done and float(rec.get("seconds") or 0) > 0:
            out[spec] = float(rec["seconds"]) / done
    mean = sum(out.values()) / len(out) if out else DEFAULT_COST_S
    return {spec: out.get(spec, mean) for spec in state["specs"]}


@dataclass
class Hooks:
    """What the loop asks of the study (experiments/run/study.py): its record, running specs, judging."""
    read: Callable[[], dict]                     # study.json
    write: Callable[[dict], None]
    run_dirs: Callable[[dict], dict]             # spec -> its run directory (None before it ran)
    # runs these specs (as study.json wants) within the seconds given (None: no budget); their failures
    run_specs: Callable[[list[str], float | None], list[str]]
    judge: Callable[[int, bool, Design], list]   # every claim's Verdict at a look (final or not) of the design
    say: Callable[[str], None]


class Loop:
    """The loop over one study directory's state; `live` is what the display shows."""

    def __init__(self, hooks: Hooks, d: Design, budget_s: float | None, clock: Callable[[], float] = time.monotonic,
                 reserve_s: float = 0.0, part: list[str] | None = None):
        self.h, self.clock = hooks, clock
        self.part = part   # the specs a part of a study runs (None: all); the others' claims are not applicable
        state = hooks.read()
        loop = state.setdefault("loop", {"budget_s": None, "spent_s": 0.0, "looks": []})
        if budget_s is not None:
            loop["budget_s"] = budget_s
        if loop["looks"]:   # a look was taken: the design it spent alpha by holds to the end (--resume)
            d = judged_at(state)[0]
        self.design = d
        loop["design"] = d.describe()
        hooks.write(state)
        self.budget_s = loop["budget_s"]
        self.reserve_s = reserve_s   # for what the command does after the loop (reserve())
        self.spent_before = float(loop.get("spent_s") or 0)
        self.started = clock()
        self.live = {"look": len(loop["looks"]), "max_looks": d.max_looks, "decided": None, "undecided": None}

    def spent(self) -> float:
        return self.spent_before + self.clock() - self.started

    def left(self) -> float | None:
        return None if self.budget_s is None else max(0.0, self.budget_s - self.spent())

    def usable(self) -> float | None:
        """What rounds may still spend: the budget left less the reserve for the claims and figures."""
        left = self.left()
        return None if left is None else max(0.0, left - self.reserve_s)

    def _save(self, state: dict) -> dict:
        state["loop"]["spent_s"] = round(self.spent(), 1)
        self.h.write(state)
        return state

    def run(self) -> list[str]:
        """Runs rounds and looks until the loop stops; returns the specs' failures ("SPEC: why"), each spec's as
        its last round left it (a pair that failed in the first pass is said again by every round its spec runs
        in: study 001 run I's one failed pair was reported as "3 spec(s) failed")."""
        failed: dict[str, str] = {}
        state = self.h.read()
        # what is not done yet (a first pass, a round cut short, a failed spec on --resume) runs first
        todo = [s for s, rec in state["specs"].items() if rec["status"] != "done" and (not self.part or s in self.part)]
        while not state["loop"].get("stopped"):
            if todo:
                now = self._round(todo)
                for spec in todo:
                    failed.pop(spec, None)
                failed.update({f.split(":", 1)[0]: f for f in now})
            state = self.h.read()
            todo = self._look(state)
        return list(failed.values())

    def _round(self, specs: list[str]) -> list[str]:
        try:
            return self.h.run_specs(specs, self.usable())
        finally:   # the time a round took counts even when it was interrupted
            self._save(self.h.read())

    def _look(self, state: dict) -> list[str]:
        """Judges every claim at the next look; records it; returns the specs to run for the one after (none:
        the loop has stopped, saying why)."""
        loop = state["loop"]
        look = len(loop["looks"]) + 1
        measured = costs(state, self.h.run_dirs(state))
        waited = waited_s(state)
        pace = _pace(loop["looks"], self.spent(), measured, waited)
        cost = {s: c * pace for s, c in measured.items()}
        left, usable = self.left(), self.usable()
        # a round the budget ended before all its pairs started (runner.cut_short): no round can follow
        cut = {s: rec["cut"] for s, rec in state["specs"].items() if rec.get("cut")}
        final = bool(cut) or look >= self.design.max_looks or usable is None or usable < min(cost.values())
        early = stopped_at(loop["looks"])   # claims decided at an earlier look: they stopped there (sequential.py)
        kept = {cid: loop["looks"][k - 1]["verdicts"][cid] for cid, k in early.items()}
        every = self.h.judge(look, final, self.design)
        results = [r for r in every if r.id not in early]
        # the rounds still to come share what is left: a round planned with every second left overran it by
        # its costs' error (001 run D: 2821 s planned at look 1, 3300 s taken, a 60 min budget ended at 68)
        rounds = max(1, self.design.max_looks - look)
        share = None if final else max(usable / rounds * (LAST_ROUND_FILL if rounds == 1 else 1), min(cost.values()))
        pairs = [] if final else next_pairs([r.judgement for r in results if r.judgement is not None], share,
                                            {key(*parse_key(p)): cost[parse_key(p)[0]] for r in results
                                             if r.judgement for p in [*(part[0] for part in r.judgement.parts),
                                                                      *r.judgement.needs]})
        undecided = [r for r in results if r.verdict not in DECIDED]
        if not final and undecided and not pairs:
            # no look follows after all (nothing affordable, or nothing would decide them): this look is the
            # last, so it spends what is left of alpha; its decisions only grow (a wider level, same data)
            final = True
            every = self.h.judge(look, final, self.design)
            results = [r for r in every if r.id not in early]
            undecided = [r for r in results if r.verdict not in DECIDED]
        entry = {"look": look, "final": final, "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 "spent_s": round(self.spent(), 1), "budget_left_s": None if left is None else round(left, 1),
                 "reserve_s": round(self.reserve_s, 1),
                 "verdicts": {r.id: kept.get(r.id, r.verdict) for r in every}, "decided": len(every) - len(undecided),
                 "judged": {r.id: r.to_dict() for r in results if r.verdict in STOPS},
                 "undecided": len(undecided), "cost_per_pair_s": {s: round(c, 1) for s, c in cost.items()},
                 "pace": round(pace, 3), **_steal_since(loop["looks"], state), **({"cut": cut} if cut else {}),
                 **({"waited_s": round(waited, 1)} if waited else {})}
        self.live.update(look=look, decided=entry["decided"], undecided=entry["undecided"])
        if not undecided and not cut:
            loop["stopped"] = "every claim is decided"
        elif final:
            loop["stopped"] = self._why_final(look, usable, cost, sum(cut.values()))
        else:
            added = raise_wants(state, pairs)
            entry["added"] = {f"{s}#{i}": n for s, more in added.items() for i, n in more.items()}
            self.h.say(f"look {look}: {entry['decided']} claim(s) decided, {entry['undecided']} undecided; "
                       f"{sum(entry['added'].values())} more repetition(s) at {len(entry['added'])} point(s), "
                       f"{_minutes(left)} of budget left")
        if (entry.get("steal") or 0) >= fidelity.STEAL_NOTED:
            self.h.say(f"warning: the hypervisor took {entry['steal']:.0%} of this machine's CPU time since "
                       f"{'look ' + str(look - 1) if look > 1 else 'the start'} (steal: other guests on its host): "
                       f"its pairs run slower and more of them are testbed-limited, so the budget buys fewer "
                       f"repetitions; a run on a quiet machine decides more")
        loop["looks"].append(entry)
        self._save(state)
        if loop.get("stopped"):
            self.h.say(f"look {look}: {entry['decided']} claim(s) decided, {entry['undecided']} undecided; "
                       f"stopped: {loop['stopped']}")
            return []
        return sorted(added)

    def _why_final(self, look: int, left: float | None, cost: dict[str, float], cut: int = 0) -> str:
        if self.budget_s is None:
            return "one look (no --budget)"
        if cut:
            return (f"the budget ended with {cut} pair(s) of the round left to run (the claims are judged on the "
                    f"repetitions that ran)")
        if look >= self.design.max_looks:
            return f"the design's last look ({self.design.max_looks})"
        if left < min(cost.values()):
            kept = f" beside {self.reserve_s:.0f} s kept for the claims and figures" if self.reserve_s else ""
            return (f"the budget is spent ({_minutes(left)} left{kept}, a pair costs at least "
                    f"{min(cost.values()):.0f} s)")
        return "more repetitions within the budget would decide no undecided claim"


def waited_s(state: dict) -> float:
    """The seconds the study's rounds waited for steal to pass (steal.py), all of them so far."""
    return sum(w.get("seconds") or 0.0 for w in state.get("steal_waits") or [])


def _pace(looks: list[dict], spent: float, measured: dict[str, float], waited: float = 0.0) -> float:
    """The last round's time over what its pairs cost at each spec's cost per pair measured now (1 before any
    round): a spec's cost is its mean over every pair so far, the first pass's mix included, and the pairs a look
    adds are the undecided claims' points, which may pack side by side worse than that mix did. The round's
    waits for steal to pass are not its pace (a spell of steal says nothing of the next round's)."""
    if not looks or not looks[-1].get("added"):
        return 1.0
    planned = sum(n * measured[parse_key(p)[0]] for p, n in looks[-1]["added"].items())
    took = spent - looks[-1]["spent_s"] - (waited - (looks[-1].get("waited_s") or 0.0))
    return max(0.5, min(4.0, took / planned)) if planned > 0 else 1.0


def _steal_since(looks: list[dict], state: dict) -> dict:
    """The look's reading of this machine's CPU time and the share the hypervisor stole since the look before (or
    the study's start): a spell of steal is why one round bought fewer repetitions than the one before (studies
    000 and 003 on 2026-12-02: 9-14 % over a run, 56 % at times), and the claims table says so."""
    since = looks[-1].get("host_cpu") if looks else state.get("host_cpu_at_start")
    steal = fidelity.steal_since(since) if since else None
    return {"host_cpu": fidelity.cpu_now(), **({"steal": round(steal, 4)} if steal is not None else {})}


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "no budget"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def pairs_wanted(state: dict, points: dict[str, dict[int, tuple[int, int]]]) -> int:
    """All pairs study.json wants. points: spec -> {index: (the spec's repetitions, pairs per repetition: 2 for
    a PAUSE point, whose run without PAUSE is a pair of its own)}."""
    total = 0
    for spec, pts in points.items():
        wants = state["specs"].get(spec, {}).get("repetitions") or {}
        total += sum(int(wants.get(str(i), reps)) * per for i, (reps, per) in pts.items())
    return total


def status(loop: Loop, state: dict, points: dict[str, dict[int, tuple[int, int]]]) -> str:
    """The live display's line: pairs done / running / queued, claims decided / undecided, budget left and an
    estimate of the time to the end (of this round, at the pairs' cost so far; with a budget, at most it)."""
    run_dirs = loop.h.run_dirs(state)
    done = running = 0
    for spec in state["specs"]:
        d, r = pairs_of(run_dirs.get(spec))
        done, running = done + d, running + r
    queued = max(0, pairs_wanted(state, points) - done - running)
    cost = costs(state, run_dirs)
    per_pair = sum(cost.values()) / len(cost) if cost else DEFAULT_COST_S
    eta = (queued + running / 2) * per_pair
    left = loop.left()
    if left is not None:
        eta = min(eta, left)
    lv = loop.live
    claims = ("claims: not judged yet" if lv["decided"] is None else
              f"claims: {lv['decided']} decided, {lv['undecided']} undecided (look {lv['look']}/{lv['max_looks']})")
    return (f"pairs: {done} done, {running} running, {queued} queued · {claims} · budget left {_minutes(left)} · "
            f"~{_minutes(eta) if math.isfinite(eta) else '?'} to go")
