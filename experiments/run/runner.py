"""The run: a spec's points (sweep x repetitions) as (point, repetition) pairs in a seeded order, each run by
repetition.py as a unit of its own, and everything the run keeps once for all of them.

    Runner(spec).run()
      preflight (nothing is set up before every need is met) -> the run directory (new, or --resume)
      -> the congestion-control laws, loaded once (kernel-wide, shared by name) -> the sinks (sample log, Prometheus)
      -> for each pair in the seeded order: repetition.run(Unit) -> its repetition.json (the pair is complete)
         and a point's summary once its last pair is in (PAUSE's baselines are pairs of their own)
      -> summary.json complete; the laws and the sinks released, always

The run owns env.json and summary.json; a repetition writes only its own folder and hands back its record, whose
`setup` the run records in env.json once per point. Around it: signals.py, schedule.py (the seeded order, resume),
archive.py (the run's folder), summary.py (summary.json), progress.py (the bar), reruns.py (spoiled repetitions).
"""
from __future__ import annotations

import math
import os
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ccrig import machine
from ccrig.commands import Commands
from ccrig.errors import InputError, PathError, RunError
from ccrig.needs import Need
from ccrig.samples import Sample
from ccrig.tcp_modules.manager import CcSet
from ccrig.topologies import testbeds
from ccrig.experiments import spec as specmod
from ccrig.experiments.run import calibration, engine, pause_run, run_laws, schedule, signals, summary
from ccrig.experiments.run.archive import RunArchive, archive_room, new_run_dir, open_to_resume
from ccrig.experiments.run.preflight import needs
from ccrig.experiments.run.progress import NoBar, progress
from ccrig.experiments.run.repetition import BASELINE, Lent, Unit, make_testbed
from ccrig.experiments.run.fleet import FLEET_ENV, Fleet
from ccrig.experiments.run.reruns import RERUNS, Reruns
from ccrig.experiments.telemetry.backfill import LOG_NAME
from ccrig.experiments.telemetry.sinks import Sinks, point_samples


def run_prefix() -> str:
    return f"ccrig-{os.getpid()}"


def fleet_inventory() -> Path | None:
    return Path(os.environ[FLEET_ENV]) if os.environ.get(FLEET_ENV) else None


@dataclass
class Options:
    out_root: Path = Path("results/runs")
    prometheus: str = "auto"        # auto: start/reuse the local server; off; or a URL of one already running
    prometheus_root: Path = Path("results/prometheus")
    prefix: str = field(default_factory=run_prefix)
    progress: bool = True
    resume: Path | None = None      # a run directory to continue (its pairs not yet complete)
    jobs: int | str = 1             # pairs side by side (engine.py); auto: as many as this machine carries
    repetitions: dict[int, int] | None = None   # point index -> its repetitions, over the spec's (a study's)
    calibration_root: Path = calibration.ROOT   # where this machine's measured capacity is cached (auto)
    reruns: int = RERUNS            # how often a spoiled repetition runs again (--quick: never; reruns.py)
    fleet: Path | None = field(default_factory=fleet_inventory)   # --fleet: the pairs go to its members
    pairs: list[tuple] | None = None   # --pairs: only these, in this order (a fleet member's batch)
    until: engine.Until | None = None   # a study's --budget: no pair starts that could not end by it (cut_short)


@dataclass
class RunResult:
    path: Path
    summary: dict
    prometheus_url: str | None


class Runner:
    def __init__(self, spec_path: Path, raw: dict, exp: specmod.Experiment, options: Options):
        self.spec_path, self.raw, self.exp, self.opt = spec_path, raw, exp, options
        self.points = specmod.points(raw, exp, str(spec_path))
        self.commands = Commands(None)
        # the run's records, made when it starts (run())
        self.archive: RunArchive | None = None
        self.run_id: str | None = None
        self.env: dict | None = None
        self.summary: dict | None = None
        self.sinks: Sinks | None = None
        self.bar: NoBar = NoBar()
        # the pairs in their seeded order; the complete ones (resume, or run now), the ones to run
        self.order: list[tuple] = []
        self.done: dict[tuple, dict] = {}
        self.todo: set[tuple] = set()
        self.failed: dict[int, list[dict]] = {}
        self.finished: set[int] = set()
        # the congestion controls, loaded once for the whole run; on a remote testbed over connections of their own
        self.cc: CcSet | None = None
        self.running: str | None = None   # the pair now running, for a second Ctrl-C's line
        self.capacity: float | None = None   # --jobs auto: this machine's measured capacity (calibration.py)
        self.reruns: Reruns | None = None
        self.started: dict[tuple, float] = {}   # pair -> when its latest attempt started
        self.ended: set[tuple] = set()   # the pairs this run's queue has finished with (complete or failed)
        self.fleet: Fleet | None = None   # --fleet: the members the pairs are dealt to (fleet.py)

    # --- the whole run ----------------------------------------------------------------------------------
    def preflight(self) -> None:
        if self.opt.fleet is not None:   # each member asks its own kernel (this machine runs no pair)
            self.fleet = Fleet(self.opt.fleet, self.opt.prefix, self.commands)
            return self.fleet.check(self.raw)
        missing = [n for n in needs(self.points, self.commands, self.opt.prefix) if not n.ok]
        # what the testbed itself lacks here (Mininet: its tools, the switch kind), asked without setting anything
        # up; a remote testbed's hosts were checked over SSH in needs()
        exp = self.points[0].experiment
        if not testbeds.get(exp.testbed).remote:
            bed = make_testbed(exp, exp.topology.build(exp.n_flows), self.commands, self.opt.prefix)
            missing += [Need(f"the {exp.testbed} testbed", "testbed", False, why) for why in bed.preflight()]
        if missing:
            raise InputError("preflight: " + "; ".join(n.problem() for n in missing))

    def run(self) -> RunResult:
        self.prepare()
        with signals.trapped(self._remaining), self.session():
            self._run_pairs()
            self.complete()
        return RunResult(self.archive.path, self.summary, self.sinks.url)

    def prepare(self) -> None:
        """Preflight, the run directory and the seeded order of its pairs; nothing is set up yet."""
        archive_room(self.opt.out_root)   # an unwritable or full --out is said before anything is made
        self.preflight()
        self._open_archive()
        self._plan()
        self.archive.write_json("summary.json", self.summary)

    @contextmanager
    def session(self):
        """What the run holds while its pairs run (the capacity measured, the laws loaded, the sinks open),
        released always, the sample log closed first."""
        laws = ExitStack()
        try:
            self._calibrate()
            if self.fleet is None:   # else each member's run loads its own
                self.cc = laws.enter_context(run_laws.loaded(self.exp, self.points, self.commands, self.opt.prefix))
                self.env["congestion_controls"] = self.cc.describe()
                self.archive.write_json("env.json", self.env)
            self._open_sinks()
            yield self
        finally:
            with signals.deferred(self._remaining):
                if self.sinks is not None:
                    self.sinks.close()
                    if self.reruns is not None:   # the log is closed: the excluded attempts' samples go
                        self.reruns.drop_samples(self.archive.path / LOG_NAME)
                laws.close()

    def complete(self) -> None:
        self.summary["complete"] = "cut" not in self.summary
        summary.add_repairs(self.summary, self.cc.repaired() if self.cc is not None else {})
        self.archive.write_json("summary.json", self.summary)
        self._strict()

    def stop(self) -> bool:
        """Whether no pair may start now: one would end past a study's --budget (Options.until)."""
        return self.opt.until is not None and self.opt.until.passed()

    def cut_short(self, todo: list[tuple]) -> int:
        """After the queue stopped at Options.until: a point with pairs left to run is summarised from the ones it
        has (its entry's `cut` says how many it lacks), one with none is left out; summary.json says how many were
        left, and the run is not complete (--resume runs them). Returns that count."""
        left = Counter(pair[0] for pair in todo if pair not in self.ended)
        if left:
            self.summary["cut"] = {"pairs_not_run": sum(left.values()),
                                   "why": "the study's --budget ended before they ran (or ran again: a spoiled one's)"}
            for index in sorted(i for i in left if any(p[0] == i and len(p) == 2 for p in self.done)):
                self._finish_point(self.points[index])
                next(p for p in self.summary["points"] if p["index"] == index)["cut"] = left[index]
                self.reruns.mark_unmeasurable(index)
            self.archive.write_json("summary.json", self.summary)
        return sum(left.values())

    def _open_archive(self) -> None:
        """A new run directory, or (--resume) the archived one, continued with its seed and order."""
        if self.opt.resume is not None:
            self.archive, self.summary, self.env = open_to_resume(self.opt.resume, self.raw)
        else:
            self.archive = RunArchive(new_run_dir(self.opt.out_root, self.exp.name))
        self.commands = Commands(self.archive.commands_log)
        self.run_id = self.archive.path.name
        if self.opt.resume is None:
            self.archive.write_spec(self.raw)
            self.env = machine.host(self.commands)
            self.env["testbed"] = self.exp.testbed
            self.archive.write_json("env.json", self.env)
            e = self.exp
            self.summary = {"experiment": e.name, "run": self.run_id, "kernel": self.env["kernel"]["release"],
                            "testbed": e.testbed, "interval_s": e.interval, "intervals": e.n_intervals,
                            "warmup": e.warmup, "repetitions": e.repetitions, "complete": False, "points": []}

    def _strict(self) -> None:
        """A strict spec fails a run the testbed limited, saying why (a point that failed has no verdict: its
        failure is reported on its own)."""
        limited = [p for p in self.summary["points"] if "fidelity" in p and p["fidelity"].get("verdict") != "ok"]
        if self.exp.fidelity == "strict" and limited:
            raise RunError("fidelity: strict, and the testbed limited " + "; ".join(
                f"point {p['index']} ({'; '.join(p['fidelity']['reasons'])})" for p in limited))

    def _open_sinks(self) -> None:
        self.sinks = Sinks(self.archive.path, self.run_id, self.exp.interval, self.commands)
        info = [Sample("run_info", {"experiment": self.exp.name, "run": self.run_id,
                                    "kernel": self.env["kernel"]["release"], "testbed": self.exp.testbed}, 1.0)]
        prometheus = self.sinks.open(info, self.opt.prometheus, self.opt.prometheus_root)
        if prometheus is not None:
            self.env["prometheus"] = prometheus
            self.archive.write_json("env.json", self.env)

    # --- the pairs: their order, resuming, a point once all its pairs are in ------------------------------
    def _plan(self) -> None:
        """The seeded order of every pair, recorded in summary.json; on resume, which pairs the archive has
        complete (their repetition.json) and which points it has summarised already. A point's repetitions may
        be raised over the spec's (Options.repetitions: a study's --budget): the recorded order is extended, its
        finished pairs kept, and a point with new pairs is summarised again once they are in."""
        seed = self.exp.seed if self.exp.seed is not None else self.summary.get("seed")
        if seed is None:
            seed = schedule.derived_seed(self.run_id)
        variants = {p.index: [BASELINE] for p in self.points if p.experiment.pause_gain}
        reps_of = {p.index: (self.opt.repetitions or {}).get(p.index, p.experiment.repetitions) for p in self.points}
        recorded = [tuple(pair) for pair in self.summary.get("order") or []] if self.opt.resume is not None else []
        self.order = (list(self.opt.pairs) if self.opt.pairs else schedule.extend(recorded, reps_of, seed, variants)
                      if recorded else schedule.order(reps_of, seed, variants))
        self.summary.update(seed=seed, seed_from="spec" if self.exp.seed is not None else "the run's name",
                            order=[list(pair) for pair in self.order], ci_level=self.exp.ci)
        if self.opt.repetitions:
            self.summary["repetitions_of"] = {str(k): v for k, v in sorted(reps_of.items())}
        self.done = self.archive.repetitions_done() if self.opt.resume is not None else {}
        # a point with no repetition finished ("failed") is tried again, and so is one with pairs it has not
        # run (its repetitions were raised); the others stay as they are
        self.summary["points"] = [p for p in self.summary["points"] if "failed" not in p and self._whole(p)]
        self.finished = {p["index"] for p in self.summary["points"]}
        self.todo = {pair for pair in self.order if pair[0] not in self.finished and pair not in self.done}
        self.summary["failed"] = sum(len(p.get("failed_repetitions", [])) for p in self.summary["points"])
        if not self.summary["failed"]:
            self.summary.pop("failed")
        if self.opt.resume is not None:
            self.summary["complete"] = False
            self.summary.pop("cut", None)   # what a deadline left is among the pairs to run now
            # an interrupted attempt's tables and samples go; the rerun's are the pair's only ones
            for pair in self.todo:
                self.archive.clear_repetition(*pair)
            dropped = self.archive.drop_samples(LOG_NAME, self.todo)
            self.summary.setdefault("resumed", []).append(
                {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pairs_done": len(self.done),
                 "points_done": len(self.finished), "pairs_to_run": len(self.todo), "samples_dropped": dropped})

    def _whole(self, point: dict) -> bool:
        """Whether a summarised point has every pair of the order: complete, or failed in its summary."""
        failed = {(f["rep"], f.get("variant", "")) for f in point.get("failed_repetitions", [])}
        return all(pair in self.done or (pair[1], (*pair[2:], "")[0]) in failed
                   for pair in self.order if pair[0] == point["index"])

    def unit(self, pair: tuple, prefix: str | None = None) -> Unit:
        """The pair as a unit of work: its point (the baseline's own for PAUSE), folder, names and laws. Made as
        the pair starts (the time is kept: a rerun's excluded attempt is told apart by it)."""
        self.started[pair] = time.time()
        pi, rep, variant = (*pair, "")[:3]
        point = self.points[pi]
        if variant == BASELINE:
            point = pause_run.baseline(point)
        exp = point.experiment
        topo = exp.topology.build(exp.n_flows)
        senders = [s for s, _ in exp.flow_pairs(topo, rep)]
        laws = {i: self.cc.kernel_name(senders[i], f.cc_label)
                for i, f in enumerate(exp.flow_list()) if f.workload.congestion_control}
        return Unit(point=point, rep=rep, out=self.archive.rep_dir(pi, rep, variant), prefix=prefix or self.opt.prefix,
                    laws=laws, experiment=self.exp.name, run_id=self.run_id, variant=variant,
                    describe="topology" not in self.env, seed=self.summary.get("seed"))

    def jobs(self) -> int:
        """How many pairs may run side by side: --jobs, or under auto as many slots as the capacity holds
        (engine.slots; the pairs' costs then decide which run together)."""
        able = testbeds.get(self.exp.testbed).side_by_side
        if self.opt.jobs == "auto":
            return engine.slots(self.points, able, self.capacity)
        return int(self.opt.jobs) if able else 1

    def _calibrate(self) -> None:
        """Under --jobs auto, with pairs to run side by side on a testbed that can: this machine's capacity,
        measured once (before anything of the run is set up) and cached, recorded in env.json."""
        able = testbeds.get(self.exp.testbed).side_by_side
        if self.opt.jobs != "auto" or self.fleet or not able or len(self.todo) < 2:
            return
        record = calibration.for_run(self.opt.calibration_root, f"{self.opt.prefix}-cal")
        if record is not None:
            self.capacity, self.env["calibration"] = record["capacity_pps"], record
            self.archive.write_json("env.json", self.env)

    def share(self) -> tuple[list[tuple], Callable, Callable[[tuple], float]]:
        """The pairs not complete yet in the seeded order, finished(pair, record, error, beside) that judges and
        keeps each attempt (a spoiled repetition runs again: reruns.py; so does one the path refused; a failed
        pair is recorded with its reason and the run goes on), and each pair's admission cost (--jobs auto). A
        point is summarised once its last pair is in."""
        todo = [pair for pair in self.order if pair in self.todo]
        left = {p.index: sum(1 for pair in todo if pair[0] == p.index) for p in self.points}
        # each point's cost, once: admission reads it for every pair, summary.json records it
        costs = {p.index: engine.pair_cost(p.experiment) for p in self.points}
        if self.capacity is not None:
            self.summary["admission"] = {"capacity_pps": self.capacity, "pair_cost_pps": {
                str(i): c for i, c in costs.items()}}
        self.reruns = Reruns(self.archive, self.summary, limit=self.opt.reruns, name=self.exp.name)

        def finished(pair: tuple, entry: dict | None, error: RunError | None, beside: bool = False) -> str | None:
            if error is None:
                if summary.record_setup(self.env, self.summary, pair, entry.get("setup", {})):
                    self.archive.write_json("env.json", self.env)
            started = self.started.get(pair)
            if self.opt.until is not None and started is not None:
                self.opt.until.took(time.time() - started)
            again = self.reruns.judge(pair, entry, beside, started) if error is None else \
                self.reruns.refused(pair, str(error), beside, started) if isinstance(error, PathError) else None
            if again:
                self.bar.more(self.exp.n_intervals)
                self.archive.write_json("summary.json", self.summary)
                return again
            if error is None:
                self.archive.write_repetition(*pair[:2], entry, *pair[2:])   # the pair is complete
                self.done[pair] = entry
            else:
                self.failed.setdefault(pair[0], []).append(
                    {"rep": pair[1], "failed": str(error), **({"variant": pair[2]} if len(pair) == 3 else {})})
                print(f"warning: {self.exp.name} point {pair[0]} repetition {pair[1]} failed: {error}")
            self.ended.add(pair)
            left[pair[0]] -= 1
            if not left[pair[0]]:
                self._finish_point(self.points[pair[0]])
                self.reruns.mark_unmeasurable(pair[0])
            return None

        for p in self.points:   # resumed: a point whose pairs are all in the archive (--pairs: of those)
            if not left[p.index] and p.index not in self.finished and any(q[0] == p.index for q in self.order):
                self._finish_point(p)
        return todo, finished, lambda pair: costs[pair[0]]

    def _run_pairs(self) -> None:
        """Every pair not complete yet, in the seeded order, one at a time in this process or side by side in
        processes of their own (--jobs; auto: admitted by cost against the calibrated capacity), or dealt to a
        fleet's members."""
        todo, finished, cost = self.share()
        jobs = self.summary["jobs"] = min(self.jobs(), max(1, len(todo)))
        with progress(self.opt.progress, len(todo) * self.exp.n_intervals) as self.bar:
            lent = Lent(self.commands, self.sinks.publish, self.bar.advance)
            if self.fleet is not None:
                try:
                    self.fleet.deal(todo, self.archive, finished, lent, self.run_id, self.raw, self.exp.duration,
                                    self.stop)
                finally:   # the members' kernel (they agree: Fleet.check), and who was lost when
                    self.summary.update(fleet=self.fleet.describe(), kernel=self.fleet.kernel)
                    self.archive.write_json("summary.json", self.summary)
            elif jobs > 1:
                auto = self.capacity is not None
                engine.side_by_side(todo, jobs, self.unit, self.opt.prefix, lambda pair: lent, finished,
                                    cost if auto else lambda pair: 0.0, self.capacity if auto else math.inf,
                                    self.stop)
            else:
                engine.one_at_a_time(todo, lambda pair: self.unit(pair), lambda pair: lent, finished, self._running,
                                     self.stop)
            self.cut_short(todo)

    def _running(self, pair: tuple | None) -> None:
        self.running = None if pair is None else engine.named(pair)

    def _finish_point(self, point: specmod.Point) -> None:
        """The point's summary entry from its repetitions (by number), the PAUSE baseline, the point's samples."""
        reps = {pair[1]: e for pair, e in self.done.items() if pair[0] == point.index and len(pair) == 2}
        baseline = [e for pair, e in sorted(self.done.items()) if pair[0] == point.index and len(pair) == 3]
        failed = self.failed.get(point.index, [])
        numbers = sorted(reps)
        if numbers:
            entry = summary.point(point, [reps[n] for n in numbers], numbers)
            pause_run.complete_point(point, entry, baseline)
        else:   # no statistics: its parameters and why
            entry = {"index": point.index, "params": point.params, "failed": failed[0]["failed"],
                     "repetitions": []}
        if failed:
            entry["failed_repetitions"] = failed
            self.summary["failed"] = self.summary.get("failed", 0) + len(failed)
        self.summary["points"] = sorted(self.summary["points"] + [entry], key=lambda p: p["index"])
        self.finished.add(point.index)
        self.archive.write_json("summary.json", self.summary)
        if numbers:
            self.sinks.publish(point_samples({"experiment": self.exp.name, "run": self.run_id,
                                              "point": str(point.index)}, entry))

    def _remaining(self) -> str:
        """What the teardown still has to remove (said on a second Ctrl-C)."""
        parts = [f"{self.running} (the {self.exp.testbed} testbed, {self.opt.prefix}-*)"] if self.running else []
        if self.sinks is not None:
            parts.append("the sample log and exporter")
        if self.cc is not None:
            parts.append("the congestion controls")
        return ", ".join(parts) or "the run's records"
