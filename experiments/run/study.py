"""A study: a paper's experiments as specs and its claims as data, run with one command and read as one table
(experiments/studies/README.md is the format; study_file.py reads it).

    study_file.find() / load(name)    the study folders (experiments/studies/<name>/study.yaml), validated
    run(study, out, quick, ...)       every spec into one study directory (study.json says which run is which)
    report(study_dir)                 each claim's verdict (analysis/verdicts.py) -> claims.md / claims.json + figures

Verdicts come from the repetitions each point has (analysis/sequential.py): a first pass of k0 repetitions of
every point (the study's `k0`, else budget.K0), then one look at the whole error rate, or with --budget more
repetitions where claims are undecided, look after look (experiments/run/budget.py; study.json's "loop").

A study directory holds study.json and runs/ (each spec's ordinary run directory). The specs of this machine run
in one queue, their pairs interleaved (together.py). The specs of a testbed that
runs them elsewhere (`elsewhere`: the vm's guest kernel) run there together (one boot, not one per spec: a TCG
boot costs 20-30 s), as the same `ccrig study run` there with --resume, so it adds its runs to the same
study.json. A study run is resumed with --resume DIR: finished specs are kept, an unfinished run continues where
it stopped (ccrig run --resume).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from ccrig.analysis.sequential import Design, held
from ccrig.analysis.verdicts import Archive, evaluate
from ccrig.errors import InputError, RunError
from ccrig.topologies import testbeds
from ccrig.experiments import spec as specmod
from ccrig.experiments.telemetry.backfill import backfill
from ccrig.experiments.run import budget as budgets
from ccrig.experiments.run import engine, fidelity, schedule, together
from ccrig.experiments.run.collectors import native_sampler
from ccrig.experiments.run.preflight import auto_testbed
from ccrig.experiments.run.progress import status_display
from ccrig.experiments.telemetry.prometheus_server import PrometheusServer
from ccrig.experiments.run.runner import RERUNS, Options, Runner, archive_room, run_prefix
from ccrig.experiments.run.signals import trapped
from ccrig.experiments.run.study_file import SpecEntry, Study, load, spec_path
from ccrig.experiments.run.study_state import (guest_deadline, guest_within, part_of, read_state, run_dir_of,
                                              write_state)

def resolved(folder: Path, study: Study, entry: SpecEntry, quick: bool, testbed: str | None = None,
             seed: int | None = None) -> tuple[Path, dict, specmod.Experiment]:
    """A spec as the study runs it. --quick: the study's `quick` settings and the spec's own (any spec path,
    as --set takes them), one repetition, and only the first value of every swept path: it checks the
    mechanics, never the claims. --seed: every spec's seed (its order of pairs, a workload's random times)."""
    path = spec_path(folder, entry.spec)
    overrides = [] if seed is None else [f"seed={seed}"]
    if quick:
        settings = {"repetitions": 1, **study.quick, **entry.quick}
        overrides += [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in settings.items()]
    if testbed is not None:
        overrides.append(f"testbed={testbed}")
    raw, exp = specmod.load(path, overrides)
    if quick and raw.get("sweep"):
        raw["sweep"] = {k: list(v[:1]) for k, v in raw["sweep"].items()}
        exp = specmod.validate(raw, str(path))
    return path, raw, exp


# --- the study directory's record (study.json: experiments/run/study_state.py) ----------------------------------

def new_state(study: Study, folder: Path, quick: bool, seed: int | None = None) -> dict:
    """study.json of a new study directory: the study, where its folder is, the hash of the study.yaml it runs
    (its claims and margins, committed before the run), and each spec's hash and status."""
    specs = {s.spec: {"sha256": hashlib.sha256(spec_path(folder, s.spec).read_bytes()).hexdigest(),
                      "answers": s.answers, "status": "pending", "run_dir": None} for s in study.specs}
    return {"study": study.name, "folder": str(folder.resolve()), "title": study.title, "quick": quick, "seed": seed,
            "study_sha256": hashlib.sha256((folder / "study.yaml").read_bytes()).hexdigest(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host_kernel": platform.release(), "host_cpu_at_start": fidelity.cpu_now(), "specs": specs}


# --- running --------------------------------------------------------------------------------------------------

def run(name: str, out_root: Path, quick: bool = False, resume: Path | None = None, prometheus: str = "auto",
        prometheus_root: Path = Path("results/prometheus"), progress: bool = True, only: list[str] | None = None,
        testbed: str | None = None, say=print, jobs: int | str = 1, budget: float | None = None,
        seed: int | None = None, report: bool = True) -> Path:
    """Runs the study's specs not yet finished in the study directory (new, or `resume`), then its loop of looks
    (experiments/run/budget.py: one look without `budget` seconds); returns the directory. A spec that fails is
    recorded and the others still run; RunError at the end names the failed ones. With `only`, a part of the study
    with a loop of its own, or on --resume without a budget the vm guest's share of the host's loop: those specs
    as study.json wants them, and no loop (study_state.part_of). report: the caller
    writes the claims and figures after this returns (the budget keeps time for them)."""
    study, folder = load(name)
    name = study.name
    if only:
        unknown = [s for s in only if s not in [e.spec for e in study.specs]]
        if unknown:
            raise InputError(f"--specs: got {unknown[0]!r}; expected among {', '.join(e.spec for e in study.specs)}")
    if budget is not None and quick:
        raise InputError("--budget: not with --quick; expected a study's run without --quick (a quick run checks the "
                         "mechanics, one repetition a point)")
    study_dir = None if resume is None else Path(resume)   # resumed: its seed as recorded
    state = new_state(study, folder, quick, seed) if resume is None else _resumed(study_dir, name, quick, budget, seed)
    part, only = part_of(state, only, budget, resume is not None, study_dir)
    entries = [e for e in study.specs if not only or e.spec in only]
    # every spec is validated before anything runs: a bad one stops the study before its first run
    planned = {e.spec: resolved(folder, study, e, quick, testbed, state.get("seed")) for e in entries}
    d = Design(max_looks=1, k0=1) if quick else budgets.design(study.k0 or budgets.K0, budget is not None)
    local, guest = _where(folder, study, entries, planned, quick, say)
    # nothing is made before every spec's needs are known to be met here
    preflight([(e.spec, planned[e.spec]) for e in local],
              [(e.spec, planned[e.spec]) for specs in guest.values() for e in specs])
    if study_dir is None:
        archive_room(Path(out_root))   # an unwritable or full --out is said before anything is made
        study_dir = Path(out_root) / f"{name}{'-quick' if quick else ''}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        study_dir.mkdir(parents=True)
    points = {s: specmod.points(raw, exp, str(path)) for s, (path, raw, exp) in planned.items()}
    sized = budgets.points_of(points)
    read = study.reads({s: {p.index: p.params for p in pts} for s, pts in points.items()})
    for spec, wants in budgets.first_pass(sized, d, read).items():
        state["specs"][spec].setdefault("repetitions", wants)
    write_state(study_dir, state)
    say(f"study {name}: {study_dir}")
    (study_dir / "runs").mkdir(exist_ok=True)

    def run_specs(specs: list[str], bar: bool, within_s: float | None = None) -> list[str]:
        state = read_state(study_dir)
        mine = {e.spec: planned[e.spec] for e in local if e.spec in specs}
        # the specs of this machine in one queue where their testbed can (together.py); quick: no reruns (reruns.py)
        failed = together.run(mine, study_dir, state,
                              dict(prometheus=prometheus, prometheus_root=prometheus_root, progress=bar, jobs=jobs,
                                   reruns=0 if quick else RERUNS, until=_until(mine, within_s)),
                              say, _seed(state, len(state.get("rounds", []))))
        for kind, group in guest.items():
            if any(e.spec in specs for e in group):
                failed += _run_elsewhere(testbeds.get(kind), name, [e.spec for e in group if e.spec in specs],
                                         budgets.given_time(planned, state), study_dir, quick, prometheus,
                                         prometheus_root, say, within_s)
        return failed

    if only and not part:   # a guest's share of the host's round (study_state.guest_share), by its deadline
        state = read_state(study_dir)
        failed = run_specs([s for s, r in state["specs"].items() if s in only and r["status"] != "done"], progress,
                           guest_within(state, only))
    else:
        failed = _loop(study_dir, d, budget, run_specs, planned, sized, progress, say, report, part)
    state = read_state(study_dir)
    state["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    steal = fidelity.steal_since(state.get("host_cpu_at_start") or {})
    if steal is not None:   # a cloud VM's neighbours slow every pair (study 003's run N: 20-43 % for ten minutes)
        state["host_cpu_steal"] = steal
    write_state(study_dir, state)
    if failed:
        error = RunError(f"study {name}: {len(failed)} spec(s) failed: " + "; ".join(failed)
                         + f"; the others are in {study_dir} (--resume it to run the failed ones again)")
        error.study_dir = study_dir   # the command line still judges the claims of what ran
        raise error
    return study_dir


def _until(planned: dict, within_s: float | None) -> engine.Until | None:
    """The round's cut (engine.Until): no pair starts that could not end within the --budget's seconds left."""
    if within_s is None or not planned:
        return None
    return engine.Until(time.monotonic() + within_s, max(exp.duration for _, _, exp in planned.values()))


def _seed(state: dict, round_: int) -> int:
    """The seed of a round's one queue: the study's --seed, else one drawn from its directory's start, and the
    round's number (each round interleaves afresh)."""
    base = state.get("seed") if state.get("seed") is not None else schedule.derived_seed(state["started"])
    return base * 1000 + round_


def _resumed(study_dir: Path, name: str, quick: bool, budget: float | None, seed: int | None) -> dict:
    """The state of a study directory to resume, if it is this study's, with its seed, and its loop can go on."""
    state = read_state(study_dir)
    if seed is not None and seed != state.get("seed"):
        raise InputError(f"--seed: got {seed}; {study_dir} runs with seed {state.get('seed')} (expected that or none)")
    if state.get("study") != name or bool(state.get("quick")) != quick:
        held = f"{state.get('study')}{' --quick' if state.get('quick') else ''}"
        wanted = f"{name}{' --quick' if quick else ''}"
        raise InputError(f"--resume: {study_dir} holds study {held!r}; expected {wanted}")
    loop = state.get("loop") or {}
    if budget is not None and loop.get("looks") and loop.get("budget_s") is None:
        raise InputError(f"--budget: {study_dir} was judged without a budget (its one look spent the whole error "
                         f"rate); expected a new study run, or --resume without --budget")
    return state


def _where(folder: Path, study: Study, entries: list[SpecEntry], planned: dict, quick: bool, say
           ) -> tuple[list[SpecEntry], dict[str, list[SpecEntry]]]:
    """The specs run on this machine, and those of each testbed that runs them elsewhere (by its kind); a spec
    of testbed auto gets its testbed here (planned is updated)."""
    local, guest = [], {}
    for e in entries:
        path, raw, exp = planned[e.spec]
        if exp.testbed == "auto":
            bed, why = auto_testbed(specmod.points(raw, exp, str(path)), run_prefix())
            say(f"{e.spec}: testbed auto: {bed}, {why}")
            planned[e.spec] = resolved(folder, study, e, quick, bed)
        kind = planned[e.spec][2].testbed
        (guest.setdefault(kind, []) if testbeds.get(kind).elsewhere else local).append(e)
    return local, guest


def _loop(study_dir: Path, d: Design, budget: float | None, run_specs, planned: dict, sized: dict, progress: bool,
          say, report: bool = True, part: list[str] | None = None) -> list[str]:
    """The loop of looks (budget.Loop), with its live display when asked (the runs' own bars off: one at a time);
    with a budget and a report to follow, the loop keeps time for the report (budget.reserve of sized: points_of)."""
    hooks = budgets.Hooks(read=lambda: read_state(study_dir), write=lambda s: write_state(study_dir, s),
                          run_dirs=lambda s: {k: run_dir_of(study_dir, r) or budgets.begun(study_dir, planned.get(k))
                                              for k, r in s["specs"].items()},
                          run_specs=lambda specs, within_s: run_specs(specs, False, within_s),
                          judge=lambda look, final, d: verdicts(study_dir, look, final, d)[2], say=say)
    loop = budgets.Loop(hooks, d, budget, reserve_s=budgets.reserve(sized) if budget is not None and report else 0.0,
                        part=part)
    # SIGTERM between runs too (judging, choosing) ends the study as an interrupted one: --resume goes on
    with status_display(progress, lambda: budgets.status(loop, hooks.read(), sized)), trapped():
        return loop.run()


def preflight(local: list[tuple[str, tuple]], guest: list[tuple[str, tuple]]) -> None:
    """What every spec needs, asked before the first one runs: a kernel feature, tool or testbed missing for the
    fifth spec must not be found after the first four have run."""
    problems = []
    for spec, (path, raw, exp) in local:
        try:
            Runner(path, raw, exp, Options(prometheus="off", progress=False)).preflight()
        except InputError as e:
            problems.append(f"{spec}: {e}")
    for spec, (_, _, exp) in guest:
        problems += [f"{spec}: {n.problem()}" for n in testbeds.get(exp.testbed).needs(exp) if not n.ok]
    if problems:
        raise InputError("; ".join(problems))


def _run_elsewhere(bed, name: str, specs: list[str], planned: dict, study_dir: Path, quick: bool, prometheus: str,
                   prometheus_root: Path, say, within_s: float | None = None) -> list[str]:
    """The specs of a testbed that runs them elsewhere, all in one go (bed.run_specs_elsewhere): `ccrig study run
    NAME --resume DIR --specs ... --testbed INNER` there, which records them in study.json; then each run is
    marked as that testbed's (env.json) and its samples are backfilled into this machine's Prometheus. With
    within_s (a --budget's round) the guest cuts its round as the host would (study_state.guest_deadline)."""
    options = next((getattr(e, bed.kind) for e in (planned[s][2] for s in specs)
                    if getattr(e, bed.kind, None) is not None), None)
    args = ["study", "run", read_state(study_dir).get("folder", name), "--resume", str(study_dir.resolve()), "--specs",
            ",".join(specs), "--testbed", bed.inner, "--prometheus", "off", "--no-progress", *(["--quick"] * quick)]
    # an emulated CPU is slow: boot, set-up and teardown take far longer than the traffic itself (a quick run's
    # 5 s of traffic took 40-230 s in a TCG guest beside another guest on a busy 2-core machine); and a guest on a
    # loaded machine may run each pair 1 + RERUNS times (testbed-limited), which the bound must allow for
    runs = [(len(specmod.points(raw, e)) * e.repetitions * (2 if e.pause_gain else 1), e.duration)
            for _, raw, e in (planned[s] for s in specs)]
    timeout = 600 + 4 * (1 if quick else 1 + RERUNS) * sum(n * (duration + 45) for n, duration in runs)
    say(f"{', '.join(specs)}: in one go on the {bed.kind} testbed")
    native_sampler()   # built here: the guest finds it in this machine's cache, read-only there
    with guest_deadline(study_dir, specs, within_s):
        status, mark = bed.run_specs_elsewhere(args, study_dir, options, timeout=timeout, name=run_prefix())
    status = status if isinstance(status, str) else f"exit status {status}"
    state, failed = read_state(study_dir), []
    for s in specs:
        rec = state["specs"][s]
        run_dir = run_dir_of(study_dir, rec)
        if run_dir is not None and run_dir.is_dir():
            mark(run_dir)
            rec["testbed"] = bed.kind
            if prometheus == "auto" and (run_dir / "summary.json").is_file():
                server = PrometheusServer(prometheus_root)
                server.ensure(planned[s][2].interval)
                backfill(run_dir, server.root / "data")
        if not together.ran_as_planned(rec):
            failed.append(f"{s}: {rec['status']} (on the {bed.kind} testbed, {status})")
    write_state(study_dir, state)
    return failed


# --- the report -----------------------------------------------------------------------------------------------

def verdicts(study_dir: Path, look: int | None = None, final: bool | None = None, d: Design | None = None
             ) -> tuple[Study, dict, list]:
    """Each claim's verdict on the study directory's runs, by the claims (and margins) of the study.yaml as it
    is now: state["judged_study_sha256"] says which, so a report can tell when it is not the one the run began
    with. The look, whether it is final and the design are the loop's last (study.json), unless given."""
    state = read_state(study_dir)
    study, folder = load(state.get("folder") or state["study"])
    state["judged_study_sha256"] = hashlib.sha256((folder / "study.yaml").read_bytes()).hexdigest()
    d, look, final = budgets.judged_at(state, look, final, d)
    points, run_dirs = {}, {}
    for spec, rec in state["specs"].items():
        run_dir = run_dir_of(study_dir, rec)
        summary = run_dir / "summary.json" if run_dir else None
        if summary is not None and summary.is_file():
            points[spec] = json.loads(summary.read_text()).get("points", [])
            run_dirs[spec] = run_dir
        else:
            points[spec] = None

    def pause_model(spec: str, point: dict) -> float | None:
        from ccrig.experiments.report import models   # lazy: scipy and matplotlib, which a guest never needs
        return models.pause_model_gain(run_dirs[spec], point)

    # a spec the budget cut (together._ended): a claim reading one of its points not run is undecided
    archive = Archive(points, pause_model, cut={s: r["cut"] for s, r in state["specs"].items() if r.get("cut")},
                      adjust=frozenset(study.adjust_for_loss))
    return study, state, [evaluate(c, archive, look, d, final) for c in study.claims]


def report(study_dir: Path, runs: bool = True) -> Path:
    """claims.md, claims.json and the figures (each run's own report, and a utility diagram per spec)."""
    from ccrig.experiments.report import study as study_report  # lazy: see pause_model; ~20 s in a TCG guest
    study, state, results = verdicts(study_dir)
    d, look, _ = budgets.judged_at(state)
    # a claim an earlier look decided stopped there (analysis/sequential.held): its verdict is that look's
    records = held([r.to_dict() for r in results], (state.get("loop") or {}).get("looks") or [], look)
    return study_report.write(study_dir, study.model_dump(), state, records, runs, d.describe())
