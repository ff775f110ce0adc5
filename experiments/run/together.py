"""A study's specs on this machine: in one queue where their testbed runs pairs side by side, else one spec
after another.

Why one queue: run one spec after another, and a claim that compares two specs compares the machine at two
times as well. Under CI load the same spec under two names read 9.486 Mbit/s three times, then 9.562 three
times (0.8 % apart, every repetition `fidelity: ok`), while each spec's own repetitions agreed within 0.05 %: the
difference was the machine's, and nothing in the intervals saw it. In one queue the specs' pairs are interleaved
at random (schedule.interleave, seeded), so what the machine does over time falls on every spec alike and shows
in their repetitions' spread, where the intervals see it; and the machine drains once, not at every spec's end.

Each spec is still a run of its own (its directory, summary.json, laws and sinks; its laws under a prefix of its
own, `<prefix>-s<k>`); only the order and the admission are shared (engine.side_by_side over pairs tagged with
their spec). study.json records each spec's share of the round's wall time (its pairs' busy time over all the
specs'), which the budget's cost per pair reads, and the round's order.
"""
from __future__ import annotations

import os
import time
from contextlib import ExitStack
from pathlib import Path

from ccrig.errors import CcrigError
from ccrig.tcp_modules.spec import cc_key, law_of, parse_cc, preset_of
from ccrig.topologies import testbeds
from ccrig.experiments.run import calibration, engine, schedule, signals, steal
from ccrig.experiments.run.repetition import Lent
from ccrig.experiments.run.runner import Options, Runner, run_prefix
from ccrig.experiments.run.study_state import run_dir_of, write_state


def runner_of(spec: str, plan, study_dir: Path, state: dict, options: dict) -> Runner:
    """The spec's run as study.json wants it: resumed where it has a summary, with the repetitions the study
    asks at each point (the first pass's, or more that the loop asked for)."""
    path, raw, exp = plan
    rec = state["specs"][spec]
    previous = run_dir_of(study_dir, rec)
    resume = previous if previous is not None and (previous / "summary.json").is_file() else None
    wants = {int(i): int(n) for i, n in (rec.get("repetitions") or {}).items()}
    return Runner(path, raw, exp, Options(out_root=study_dir / "runs", resume=resume, repetitions=wants or None,
                                          **options))


def in_one_queue(runner: Runner) -> bool:
    return runner.opt.fleet is None and testbeds.get(runner.exp.testbed).side_by_side


def run(specs: dict[str, tuple], study_dir: Path, state: dict, options: dict, say, seed: int) -> list[str]:
    """Runs the specs (name -> plan) as study.json wants them; returns their failures. options: the Options every
    spec's run gets (prometheus, progress, jobs, reruns)."""
    runners = {s: runner_of(s, plan, study_dir, state, options) for s, plan in specs.items()}
    queued = {s: r for s, r in runners.items() if in_one_queue(r) and not options.get("progress")}
    failed = []
    for k, group in enumerate(law_groups(queued)):
        failed += _queue(group, study_dir, state, options.get("jobs", 1), say, seed + k)
    for spec, runner in runners.items():
        if spec not in queued:
            failed += _alone(spec, runner, study_dir, state, say)
    return failed


def law_groups(runners: dict[str, Runner]) -> list[dict[str, Runner]]:
    """The specs in groups that can share a queue. A kernel module serves one parameterisation of a law that is
    not a preset at a time (its tunable instance: module parameters), so specs that need different ones of one
    law family go in different groups (one queue after another); presets, builtins and BPF variants never meet."""
    groups: list[tuple[dict[str, Runner], dict[str, set]]] = []
    for spec, r in runners.items():
        mine = _custom_laws(r)
        for members, laws in groups:
            if all(len(laws.get(family, set()) | keys) <= 1 for family, keys in mine.items()):
                members[spec] = r
                for family, keys in mine.items():
                    laws.setdefault(family, set()).update(keys)
                break
        else:
            groups.append(({spec: r}, mine))
    return [members for members, _ in groups]


def _custom_laws(runner: Runner) -> dict[str, set]:
    """Law family -> the keys of its parameterisations that are not presets, over every flow of every point."""
    out: dict[str, set] = {}
    for p in runner.points:
        for f in p.experiment.flow_list():
            cc = parse_cc(f.cc)
            law = law_of(cc)
            if law is not None and preset_of(law) is None:
                out.setdefault(law.law, set()).add(cc_key(cc))
    return out


def _alone(spec: str, runner: Runner, study_dir: Path, state: dict, say) -> list[str]:
    """One spec's run as the run itself goes (its own bar, a fleet's dealing, a testbed of one pair at a time)."""
    rec = state["specs"][spec]
    started = time.monotonic()
    rec.update(status="running", testbed=runner.exp.testbed)
    write_state(study_dir, state)
    try:
        result = runner.run()
    except signals.Interrupted:
        _record(rec, runner, time.monotonic() - started, "interrupted", study_dir, state)
        raise
    except CcrigError as e:
        _record(rec, runner, time.monotonic() - started, f"failed: {e}", study_dir, state)
        say(f"{spec}: failed: {e}")
        return [f"{spec}: {e}"]
    return _ended(spec, runner, result.summary, time.monotonic() - started, study_dir, state, say)


def _ended(spec, runner, summary: dict, seconds: float, study_dir: Path, state: dict, say) -> list[str]:
    """The spec's status after its round: failed (some repetition failed), cut (the --budget ended before some
    of its pairs ran: that look is the last, and judges the claims without them), else done."""
    bad, cut = summary.get("failed"), (summary.get("cut") or {}).get("pairs_not_run")
    state["specs"][spec]["cut"] = cut or 0
    _record(state["specs"][spec], runner, seconds, f"failed: {bad} repetition(s) failed" if bad else
            cut_status(cut) if cut else "done", study_dir, state)
    say(f"{spec}: {state['specs'][spec]['status']} ({state['specs'][spec]['seconds']:.0f} s) -> {runner.archive.path}")
    return [f"{spec}: {bad} repetition(s) failed"] if bad else []


def cut_status(cut: int) -> str:
    return f"cut: {cut} pair(s) left to run when the budget ended"


def ran_as_planned(rec: dict) -> bool:
    """A spec's round ended done or cut by the budget (judged on what ran), not failed nor interrupted: its
    study.json record (a guest's, read back by the host, too)."""
    return rec["status"] in ("done", cut_status(rec.get("cut") or 0))


def _record(rec: dict, runner: Runner, seconds: float, status: str, study_dir: Path, state: dict) -> None:
    rec["status"] = status
    rec["seconds"] = round(seconds, 1) + float(rec.get("seconds") or 0)
    if runner.archive is not None:
        rec["run_dir"] = os.path.relpath(runner.archive.path, study_dir)
    write_state(study_dir, state)


def _queue(runners: dict[str, Runner], study_dir: Path, state: dict, jobs, say, seed: int) -> list[str]:
    """The specs' pairs in one seeded queue, side by side (engine.py); each spec's run prepared, held and
    completed as Runner.run does it, a spec that fails in any phase recorded so and the others gone on with."""
    prefix, failed, started = run_prefix(), [], time.monotonic()
    for k, (spec, r) in enumerate(runners.items()):
        r.opt.prefix = f"{prefix}-s{k}"   # each run's laws and calibration under names of its own
        state["specs"][spec].update(status="running", testbed=r.exp.testbed)
    write_state(study_dir, state)
    busy = dict.fromkeys(runners, 0.0)   # each spec's pairs' wall time: its share of the round's
    gate = _gate(runners, say)

    def fail(spec: str, why: str) -> None:
        _record(state["specs"][spec], runners.pop(spec), time.monotonic() - started, f"failed: {why}", study_dir,
                state)
        say(f"{spec}: failed: {why}")
        failed.append(f"{spec}: {why}")

    for spec, r in list(runners.items()):
        try:
            r.prepare()
        except CcrigError as e:
            fail(spec, str(e))
    with ExitStack() as held, signals.trapped(lambda: "the specs' runs (" + ", ".join(runners) + ")"):
        try:
            for spec, r in list(runners.items()):
                try:
                    held.enter_context(r.session())
                except CcrigError as e:
                    fail(spec, str(e))
            _pairs(runners, busy, jobs, seed, state, lambda: write_state(study_dir, state), gate)
        except signals.Interrupted:
            _waited(gate, state)
            for spec, r in runners.items():
                _record(state["specs"][spec], r, _share(busy, spec, _wall(started, gate)), "interrupted",
                        study_dir, state)
            raise
        _waited(gate, state)
        for spec, r in list(runners.items()):
            try:
                r.complete()
            except CcrigError as e:
                fail(spec, str(e))
    wall = _wall(started, gate)
    for spec, r in runners.items():
        failed += _ended(spec, r, r.summary, _share(busy, spec, wall), study_dir, state, say)
    return failed


def _gate(runners: dict[str, Runner], say) -> steal.Gate | None:
    """A full run's wait for steal to pass (steal.py), bounded by the budget where there is one; none in a quick
    run (it reruns nothing, so it has no attempts to save)."""
    first = next(iter(runners.values()), None)
    if first is None or first.opt.reruns <= 0:
        return None
    return steal.Gate(say, first.stop, bounded=first.opt.until is not None)


def _wall(started: float, gate: steal.Gate | None) -> float:
    """The round's wall time but its waits for steal to pass: the specs' cost per pair is the machine's."""
    return time.monotonic() - started - (gate.waited if gate is not None else 0.0)


def _waited(gate: steal.Gate | None, state: dict) -> None:
    """The round's waits for steal into study.json (the claims' report says them; the budget's pace leaves
    them out)."""
    if gate is not None and gate.waits:
        state.setdefault("steal_waits", []).extend(gate.waits)
        gate.waits = []


def _share(busy: dict, spec: str, wall: float) -> float:
    total = sum(busy.values())
    return wall * busy[spec] / total if total > 0 else wall / max(1, len(busy))


def _pairs(runners: dict[str, Runner], busy: dict, jobs, seed: int, state: dict, save,
           gate: steal.Gate | None = None) -> None:
    _calibrated(runners, jobs)
    shares = {spec: r.share() for spec, r in runners.items()}
    queue = schedule.interleave({spec: todo for spec, (todo, _, _) in shares.items()}, seed)
    state.setdefault("rounds", []).append({"seed": seed, "order": [list(pair) for pair in queue]})
    save()
    capacity = next((r.capacity for r in runners.values() if r.capacity is not None), None)
    points = [p for r in runners.values() for p in r.points]
    slots = engine.slots(points, True, capacity) if jobs == "auto" else int(jobs)
    slots = min(slots, max(1, len(queue)))
    for r in runners.values():
        r.summary["jobs"] = slots
    lents = {spec: Lent(r.commands, r.sinks.publish, r.bar.advance) for spec, r in runners.items()}

    def finished(pair: tuple, entry, error, beside: bool):
        spec, own = pair[0], pair[1:]
        busy[spec] += time.time() - runners[spec].started.get(own, time.time())
        return shares[spec][1](own, entry, error, beside)

    stop = next(iter(runners.values())).stop   # the same Options.until for every spec of the study's round
    if slots == 1:
        engine.one_at_a_time(queue, lambda pair: runners[pair[0]].unit(pair[1:]), lambda pair: lents[pair[0]],
                             finished, stop=stop, gate=gate)
    else:
        engine.side_by_side(queue, slots, lambda pair, name: runners[pair[0]].unit(pair[1:], name), run_prefix(),
                            lambda pair: lents[pair[0]], finished,
                            (lambda pair: shares[pair[0]][2](pair[1:])) if capacity is not None else
                            (lambda pair: 0.0), capacity if capacity is not None else float("inf"), stop, gate)
    for spec, r in runners.items():
        r.cut_short(shares[spec][0])


def _calibrated(runners: dict[str, Runner], jobs) -> None:
    """Under --jobs auto, every spec's run admits by this machine's capacity: a spec of fewer than two pairs did
    not ask for it (Runner._calibrate), so it gets the others' or, where none did, one measured (cached) now."""
    if jobs != "auto" or sum(len(r.todo) for r in runners.values()) < 2:
        return
    record = next((r.env["calibration"] for r in runners.values() if r.env.get("calibration")), None)
    if record is None:
        first = next(iter(runners.values()))
        record = calibration.for_run(first.opt.calibration_root, f"{first.opt.prefix}-cal")
    if record is None:
        return
    for r in runners.values():
        if r.capacity is None:
            r.capacity, r.env["calibration"] = record["capacity_pps"], record
            r.archive.write_json("env.json", r.env)
