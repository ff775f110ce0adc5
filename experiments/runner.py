"""The runner: spec -> points (sweep x repetitions) -> for each: preflight, testbed up, traffic, sampling every
interval into metrics, the sinks and the archive -> testbed down, always.

    for point in sweep:
        for rep in repetitions:
            testbed.up(topology) -> the flows' servers -> samplers -> senders, each at its start
            every interval: counters -> metrics -> intervals.csv + the sinks (sample log, Prometheus)
            senders done -> results and cross-check (summary.py) -> testbed.down()   (also on error and Ctrl-C)
        summary.json += the point (mean of interval means, std, 95 % CI; repetitions on top)

Around it: signals.py (Ctrl-C and SIGTERM), sinks.py (where samples go), summary.py (what summary.json says),
archive.py (the run's folder), workloads/ (the flows' programs), progress.py (the bar), schedule.py (the seeded
order and resume), fidelity.py (the run's verdict on itself), events/ and sender_tcp.py (what changes the links and
the senders).

Why this module is over 400 lines: it is the run's life cycle read in order, and each part of a repetition
(set-up, the interval loop, teardown) hands its state to the next through the Runner. The interval loop (_measure)
is the next piece to move out, as a Measurement of its own, once the state it shares with teardown is its own.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ccrig import machine
from ccrig.analysis import metrics
from ccrig.analysis.intervals import FlowSeries, fair_shares, max_min, network_capacity, system_interval
from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.needs import Need
from ccrig.qdiscs.shaper import LEAF
from ccrig.samples import Sample
from ccrig.tcp_modules.manager import CcSet, RemoteSystem
from ccrig.topologies import delayline, loss, testbeds
from ccrig.topologies.testbed import Testbed
from ccrig.topologies.testbeds.hosts import NodeConnections
from . import fidelity, pause_run, schedule, signals, summary
from . import spec as specmod
from .archive import RepetitionTables, RunArchive, new_run_dir, open_to_resume
from .backfill import LOG_NAME
from .collectors import FlowSampler, QdiscReader, ReceiverLog, machine_samplers
from .events.conditions import LinkConditions
from .inside import SYSTEM_COLUMNS as QUEUE_COLUMNS, Inside
from .preflight import delay_via, needs, netem_here
from .sender_tcp import SenderTcp
from .progress import NoBar, progress
from .sinks import Sinks, interval_samples, link_drop_samples, point_samples, source_samples
from .workloads import Flow, Traffic

TRACE_PERIOD = 0.02   # seconds: congestion events are shorter than an interval
GRACE = 0.1           # seconds past a boundary before its interval is computed (a sample past it must arrive)


def run_prefix() -> str:
    return f"ccrig-{os.getpid()}"


def make_testbed(exp: specmod.Experiment, topology, commands: Commands, prefix: str) -> Testbed:
    """The testbed the spec names, with its section of the spec (`<kind>: {...}`) as its options."""
    return testbeds.get(exp.testbed)(topology, commands, prefix, getattr(exp, exp.testbed, None))


@dataclass
class Options:
    out_root: Path = Path("results/runs")
    prometheus: str = "auto"        # auto: start/reuse the local server; off; or a URL of one already running
    prometheus_root: Path = Path("results/prometheus")
    prefix: str = field(default_factory=run_prefix)
    progress: bool = True
    resume: Path | None = None      # issue 14: a run directory to continue (its pairs not yet complete)


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
        # issue 14: the (point, repetition) pairs in their order; the complete ones (resume), the ones to run
        self.order: list[tuple[int, int]] = []
        self.done: dict[tuple[int, int], dict] = {}
        self.todo: set[tuple[int, int]] = set()
        self.finished: set[int] = set()
        # the congestion controls, loaded once for the whole run; on a remote testbed over connections of their own
        self.cc: CcSet | None = None
        self.cc_hosts: NodeConnections | None = None
        # one repetition's parts, torn down after it
        self.testbed: Testbed | None = None
        self.traffic: Traffic | None = None
        self.samplers: list[FlowSampler] = []
        self.pause: pause_run.PauseRun | None = None
        self.inside: Inside | None = None   # the capture and the queue monitor, when the spec asks
        # issue 15: the links' BPF loss and events of the repetition
        self.links: LinkConditions | None = None
        self.sender_tcp: SenderTcp | None = None

    # --- the whole run ----------------------------------------------------------------------------------
    def preflight(self) -> None:
        missing = [n for n in needs(self.points, self.commands, self.opt.prefix) if not n.ok]
        # what the testbed itself lacks here (Mininet: its tools, the switch kind), asked without setting anything
        # up; a remote testbed's hosts were checked over SSH in needs() (preflight._remote: reachable, root,
        # interfaces, tools, their kernels' qdiscs, PAUSE)
        exp = self.points[0].experiment
        if not testbeds.get(exp.testbed).remote:
            bed = make_testbed(exp, exp.topology.build(exp.n_flows), self.commands, self.opt.prefix)
            missing += [Need(f"the {exp.testbed} testbed", "testbed", False, why) for why in bed.preflight()]
        if missing:
            raise InputError("preflight: " + "; ".join(n.problem() for n in missing))

    def run(self) -> RunResult:
        # issue 16: an unwritable or full --out is said before anything is made (preflight probes in a namespace)
        archive_room(self.opt.out_root)
        self.preflight()
        # issue 14: a new run directory, or (--resume) the archived one, continued with its seed and order
        if self.opt.resume is not None:
            self.archive, self.summary, self.env = open_to_resume(self.opt.resume, self.raw)
            run_dir = self.archive.path
        else:
            run_dir = new_run_dir(self.opt.out_root, self.exp.name)
            self.archive = RunArchive(run_dir)
        self.commands = Commands(self.archive.commands_log)
        self.run_id = run_dir.name
        if self.opt.resume is None:
            self.archive.write_spec(self.raw)
            self.env = machine.host(self.commands)
            self.env["testbed"] = self.exp.testbed
            self.archive.write_json("env.json", self.env)
            self.summary = {"experiment": self.exp.name, "run": self.run_id,
                            "kernel": self.env["kernel"]["release"], "testbed": self.exp.testbed,
                            "interval_s": self.exp.interval, "intervals": self.exp.n_intervals,
                            "warmup": self.exp.warmup, "repetitions": self.exp.repetitions, "complete": False,
                            "points": []}
        self._plan()   # issue 14
        self.archive.write_json("summary.json", self.summary)
        with signals.trapped(self._remaining):
            try:
                self._load_ccs()
                self._open_sinks()
                # issue 14: the (point, repetition) pairs in their seeded order; a point is summarised after the
                # last of its pairs (on resume, the pairs complete in the archive are read, not run again)
                last = schedule.last_of_point(self.order)
                reps_of: dict[int, dict[int, dict]] = {}
                for (pi, rep), entry in self.done.items():
                    reps_of.setdefault(pi, {})[rep] = entry
                failed_of: dict[int, list[dict]] = {}
                total = len(self.todo) * (2 if self.exp.pause_gain else 1)
                with progress(self.opt.progress, total * self.exp.n_intervals) as self.bar:
                    for i, (pi, rep) in enumerate(self.order):
                        point = self.points[pi]
                        if (pi, rep) in self.todo:
                            # issue 16: a repetition that fails (a program or sampler died) is recorded with
                            # its reason and the run goes on; the command line's exit code says so at the end
                            try:
                                entry = self.run_repetition(point, rep)
                                self.archive.write_repetition(pi, rep, entry)   # issue 14: the pair is complete
                                reps_of.setdefault(pi, {})[rep] = entry
                            except RunError as e:
                                failed_of.setdefault(pi, []).append({"rep": rep, "failed": str(e)})
                                print(f"warning: point {point.index} repetition {rep} failed: {e}")
                        if i == last[pi] and pi not in self.finished:
                            self._finish_point(point, reps_of.get(pi, {}), failed_of.get(pi, []))
                self.summary["complete"] = True
                self.archive.write_json("summary.json", self.summary)
                # issue 17: a strict spec fails a run the testbed limited, saying why
                # (a point that failed has no verdict: its failure is reported on its own)
                limited = [p for p in self.summary["points"]
                           if "fidelity" in p and p["fidelity"].get("verdict") != "ok"]
                if self.exp.fidelity == "strict" and limited:
                    raise RunError("fidelity: strict, and the testbed limited " + "; ".join(
                        f"point {p['index']} ({'; '.join(p['fidelity']['reasons'])})" for p in limited))
            finally:
                with signals.deferred(self._remaining):
                    if self.sinks is not None:
                        self.sinks.close()
                    self._release_ccs()
        return RunResult(run_dir, self.summary, self.sinks.url)

    def _load_ccs(self) -> None:
        """Loads the congestion controls every point needs (modules or BPF), once for the whole run. On a remote
        testbed each flow's law is loaded on its sender's host, under that host's own name (iperf3's server
        only tries the sender's name on its socket and carries on without it; a receiver sends no data), over
        SSH connections of their own kept for the whole run: each repetition's testbed connects and
        disconnects, the laws outlive it."""
        remote = testbeds.get(self.exp.testbed).remote
        ccs: dict = {}   # the sender node on a remote testbed (None: this machine) -> its flows' cc values
        for p in self.points:
            e = p.experiment
            topo = e.topology.build(e.n_flows)
            for i, f in enumerate(e.flow_list()):
                ccs.setdefault(topo.pairs[i % len(topo.pairs)][0] if remote else None, []).append(f.cc)
        systems = {None: None}
        if remote:
            self.cc_hosts = NodeConnections(list(ccs), self.commands, self.opt.prefix)
            problems = self.cc_hosts.open()
            if problems:
                raise InputError(f"{self.exp.testbed} testbed: " + "; ".join(problems))
            systems = {n: RemoteSystem.of(self.cc_hosts.hosts[n], c) for n, c in self.cc_hosts.conns.items()}
        self.cc = CcSet(self.commands, self.opt.prefix, self.exp.cc_form, systems)
        self.cc.prepare(ccs)
        self.env["congestion_controls"] = self.cc.describe()
        self.archive.write_json("env.json", self.env)

    def _release_ccs(self) -> None:
        try:
            if self.cc is not None:
                left = self.cc.release()
                if left:
                    print(f"warning: could not remove congestion control(s) {', '.join(left)}; run `ccrig clean`"
                          + (" -i INVENTORY" if self.cc_hosts is not None else ""))
        finally:
            if self.cc_hosts is not None:
                self.cc_hosts.close()

    def _open_sinks(self) -> None:
        self.sinks = Sinks(self.archive.path, self.run_id, self.exp.interval, self.commands)
        info = [Sample("run_info", {"experiment": self.exp.name, "run": self.run_id,
                                    "kernel": self.env["kernel"]["release"], "testbed": self.exp.testbed}, 1.0)]
        prometheus = self.sinks.open(info, self.opt.prometheus, self.opt.prometheus_root)
        if prometheus is not None:
            self.env["prometheus"] = prometheus
            self.archive.write_json("env.json", self.env)

    def summarize_point(self, point: specmod.Point, reps: list[dict], numbers: list[int] | None = None) -> dict:
        return summary.point(point, reps, numbers)

    # --- issue 14: the order of the pairs, resuming, a point once all its pairs are done -------------------
    def _plan(self) -> None:
        """The seeded order of every (point, repetition) pair, recorded in summary.json; on resume, which pairs
        the archive has complete (their repetition.json) and which points it has summarised already."""
        seed = self.exp.seed if self.exp.seed is not None else self.summary.get("seed")
        if seed is None:
            seed = schedule.derived_seed(self.run_id)
        self.order = schedule.order({p.index: p.experiment.repetitions for p in self.points}, seed)
        self.summary.update(seed=seed, seed_from="spec" if self.exp.seed is not None else "the run's name",
                            order=[list(pair) for pair in self.order], ci_level=self.exp.ci)
        # a point with no repetition finished ("failed") is tried again; the others stay as they are
        self.summary["points"] = [p for p in self.summary["points"] if "failed" not in p]
        self.finished = {p["index"] for p in self.summary["points"]}
        self.done = self.archive.repetitions_done() if self.opt.resume is not None else {}
        self.todo = {pair for pair in self.order if pair[0] not in self.finished and pair not in self.done}
        self.summary["failed"] = sum(len(p.get("failed_repetitions", [])) for p in self.summary["points"])
        if not self.summary["failed"]:
            self.summary.pop("failed")
        if self.opt.resume is not None:
            self.summary["complete"] = False
            # an interrupted attempt's tables and samples go; the rerun's are the pair's only ones
            for pi, rep in self.todo:
                self.archive.clear_repetition(pi, rep)
            dropped = self.archive.drop_samples(LOG_NAME, self.todo)
            self.summary.setdefault("resumed", []).append(
                {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pairs_done": len(self.done),
                 "points_done": len(self.finished), "pairs_to_run": len(self.todo), "samples_dropped": dropped})

    def _finish_point(self, point: specmod.Point, reps: dict[int, dict], failed: list[dict]) -> None:
        """The point's summary entry from its repetitions (by number), the PAUSE baseline, the point's samples."""
        numbers = sorted(reps)
        if numbers:
            entry = self.summarize_point(point, [reps[n] for n in numbers], numbers)
            pause_run.complete_point(self, point, entry)
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

    # --- one repetition of one point ------------------------------------------------------------------
    def run_repetition(self, point: specmod.Point, rep: int, out: Path | None = None) -> dict:
        exp = point.experiment
        topo = exp.topology.build(exp.n_flows)
        out = out or self.archive.rep_dir(point.index, rep)
        pairs = [topo.pairs[i % len(topo.pairs)] for i in range(exp.n_flows)]
        # the kernel's name for the flow's law on its sender (per host on a remote testbed)
        # issue 15: a flow with a stop sends from start to stop
        flows = [Flow(f.workload, i, self.cc.kernel_name(pairs[i][0], f.cc_label), f.cc_label, *pairs[i],
                      start=f.start, duration=exp.duration if f.stop is None else f.stop - f.start)
                 if f.workload.congestion_control else
                 Flow(f.workload, i, "", "none", *pairs[i], start=f.start,   # UDP: no congestion control
                      duration=exp.duration if f.stop is None else f.stop - f.start)
                 for i, f in enumerate(exp.flow_list())]
        # issue 15: loss the BPF program realises (no netem here) is taken off the links the testbed builds
        self.links = LinkConditions(exp, topo, netem_here(exp, self.commands, self.opt.prefix))
        # added delay: netem, or a delay line the testbed puts on each delayed link (topologies/delayline)
        via = delay_via(exp, self.commands, self.opt.prefix)[0]
        built, lines = delayline.plan(self.links.realised, via == "line")
        self.testbed = make_testbed(exp, built, self.commands, self.opt.prefix)
        self.testbed.lines = lines
        try:
            self.testbed.up()
            # issue 15: BPF drop points, the events' log, the senders' TCP settings (recorded for each point)
            self.links.start(self.testbed, self.commands, out)
            self.sender_tcp = SenderTcp(self.testbed, [(i, f, *pairs[i]) for i, f in enumerate(exp.flow_list())])
            tcp = self.sender_tcp.apply()
            if rep == 0:
                self.env.setdefault("sender_tcp", {})[str(point.index)] = tcp
                self.env.setdefault("links", {})[str(point.index)] = {**self.links.describe(),
                                                                      "delay": delayline.describe(topo, via)}
                self.archive.write_json("env.json", self.env)
            self.pause = pause_run.PauseRun.of(exp, topo, self.testbed, self.commands, out)
            if self.pause is not None:
                self.pause.start()   # before the traffic
                # the run's first PAUSE settings (mode, auto's note, the scaling); each repetition has its own
                self.summary.setdefault("pause", self.env.setdefault("pause", self.pause.describe()))
            if point.index == 0 and rep == 0:
                self.env["topology"] = self.testbed.describe()
                self.archive.write_json("env.json", self.env)
            return self._measure(point, rep, topo, flows, out)
        finally:
            self._teardown()

    def _measure(self, point, rep, topo, flows: list[Flow], out: Path) -> dict:
        exp = point.experiment
        rate = topo.egress_of(*topo.bottleneck).egress.rate.bps(topo.wire)
        t_max = metrics.payload_capacity(rate, topo.mtu)
        # several shaped queues (a parking lot): each flow's T_max is its max-min fair share over the ones it
        # crosses, the system's the most the flows together could carry over them
        capacity = {q: metrics.payload_capacity(topo.egress_of(*q).egress.rate.bps(topo.wire), topo.mtu)
                    for q in topo.queues() if topo.egress_of(*q).egress.rate is not None}
        paths = None
        if len(capacity) > 1:
            paths = [[q for q in topo.path(f.sender, f.receiver) if q in capacity] for f in flows]
            t_max = network_capacity(paths, capacity)
            share = statistics.fmean(x or 0.0 for x in max_min(paths, capacity, [True] * len(flows)))
        else:
            capacity = None
            share = t_max / len(flows)
        # the capture and the queue monitor see every packet of the flows, their handshakes included
        self.inside = Inside.of(exp, topo, self.testbed, self.commands, out)
        if self.inside is not None:
            self.inside.start()
        self.traffic = Traffic(self.testbed, flows, out)
        self.traffic.start_servers()
        # issue 17: one sampler per machine for every TCP flow's two sockets (UDP flows: their receiver's log)
        self.samplers = machine_samplers(self.testbed, [f for f in flows if f.workload.tcp_info], TRACE_PERIOD)
        self.samplers += [ReceiverLog(self.testbed, f.receiver, f.receiver_key, [f.sender_key, f.receiver_key],
                                      out / f.workload.server_output.format(index=f.index),
                                      self.traffic.server_of(f), TRACE_PERIOD)
                          for f in flows if not f.workload.tcp_info]   # issue 15
        sampler_of = {k: s for s in self.samplers for k in s.keys}
        # time starts once every sampler is polling: a Python start can take seconds on a slow (emulated) CPU
        for s in self.samplers:
            s.wait_ready(timeout=120)
        t0 = time.time()
        for s in self.samplers:
            s.t0 = t0
        # every queue that can drop, the bottleneck first; a discipline with classes of its own (drr: one per
        # flow) has them read each interval too
        queues = [QdiscReader(self.testbed, a, self.testbed.egress_device(a, b),
                              classes_under=LEAF if (q := topo.egress_of(a, b).egress.qdisc) is not None
                              and q.kind == "drr" else None) for a, b in topo.queues()]
        upstream = [loss.upstream(topo, loss.DropPoint(a, b)) for a, b in topo.queues()]
        tables = RepetitionTables(out)
        labels = {"experiment": self.exp.name, "run": self.run_id, "point": str(point.index), "rep": str(rep),
                  "qdisc": exp.topology.bottleneck.qdisc.label() if hasattr(exp.topology, "bottleneck") else "",
                  **(self.pause.labels() if self.pause else {})}
        pending = sorted(flows, key=lambda f: f.start)
        self.links.start_clock(t0, labels)   # issue 15: link events, applied on a clock of their own from t0
        qdisc_prev = self._with_links(self._qdisc_totals(queues, upstream, tables, 0.0))
        # issue 17: the run certifies itself (CPU, the bottleneck's dequeue rate and queue, the sampler's lateness)
        monitor = fidelity.Monitor(rate, t_max, exp.warmup, qdisc_prev["rows"],
                                   greedy=fidelity.greedy(topo, flows, exp.flows),
                                   steady=self.pause is None and not getattr(exp, "events", None))
        tables.intervals.add_columns(["active", "fair_share_bps", "link_dropped"])   # issue 15
        if exp.queue_monitor:
            tables.intervals.add_columns(list(QUEUE_COLUMNS))
        rows_by_flow: dict[int, list[dict]] = {f.index: [] for f in flows}
        system_rows: list[dict] = []
        try:
            for k in range(1, exp.n_intervals + 1):
                boundary = k * exp.interval
                # start the flows whose time has come, then sleep to the boundary
                while True:
                    now = time.time() - t0
                    while pending and pending[0].start <= now:
                        self.traffic.start_client(pending.pop(0))
                    wake = min([boundary] + [f.start for f in pending])
                    if now >= boundary:
                        break
                    time.sleep(max(0.0, min(wake, boundary) - now))
                q = self._with_links(self._qdisc_totals(queues, upstream, tables, time.time() - t0))
                late = self._wait_samples(boundary + GRACE, t0)   # issue 14: samplers still late: degraded
                a, b = boundary - exp.interval, boundary
                rows = []
                # issue 15: T_max shared among the flows active in [a, b] only
                shares = fair_shares(t_max, [(f.start, f.start + f.duration) for f in flows], a, b, paths, capacity)
                for f, fs in zip(flows, shares):
                    snd = FlowSeries(sampler_of[f.sender_key].snapshot(f.sender_key))
                    row = f.workload.interval(snd, a, b, fs or t_max)   # issue 15: a UDP kind's own rows
                    row.update(active=fs is not None, fair_share_bps=fs)
                    rows.append(row)
                    rows_by_flow[f.index].append(row)
                sysrow = system_interval(rows, t_max, q["dropped"] - qdisc_prev["dropped"],
                                         q["offered"] - qdisc_prev["offered"])
                sysrow["link_dropped"] = q["link_dropped"] - qdisc_prev["link_dropped"]   # issue 15
                # issue 14: Jain over throughput (study 001) beside the goodput one; an interval computed while a
                # sampler was more than 1 s late (stale counters) is marked degraded, said, and counted
                sysrow["jain_throughput"] = summary.jain_throughput(rows)
                for r in [*rows, sysrow]:
                    r["degraded"] = bool(late)
                if late:
                    print(f"warning: point {point.index} repetition {rep} interval {k - 1}: the sampler on "
                          f"{', '.join(late)} is more than 1 s late; the interval is computed from stale counters "
                          f"and marked degraded")
                monitored, queue_samples = (self.inside.interval(k - 1, a, b, t0, labels)
                                            if self.inside is not None else ({}, []))
                sysrow.update(monitored)
                qdisc_prev = q
                system_rows.append(sysrow)
                monitor.interval(k - 1, exp.interval, sysrow["goodput_bps"], q["rows"])   # issue 17
                tables.interval(k - 1, a, b, flows, rows, sysrow)
                self.sinks.publish([*(self.pause.samples(labels, t0 + b) if self.pause else []),
                                    *interval_samples(labels, flows, rows, sysrow, q["all_rows"], t0 + b),
                                    *link_drop_samples(labels, q["per_link"], t0 + b),
                                    *self.links.applied(), *queue_samples])   # issue 15: the link events
                self.bar.advance()
            # the senders end on their own; their sockets' final counters close the trace
            self.traffic.wait(timeout=exp.duration + 30)
            time.sleep(2 * TRACE_PERIOD)
        finally:
            tables.close()
            for s in self.samplers:
                s.stop()
        tables.trace(flows, sampler_of)
        results = self.traffic.results()
        lines = self.testbed.stop_lines()   # each delay line's counters: how late its frames left
        checks = summary.cross_check(flows, sampler_of, results)
        inside = self.inside.stop(flows, sampler_of) if self.inside is not None else {}
        self.inside = None
        entry = summary.repetition(flows, rows_by_flow, system_rows, exp.warmup, t_max, share, checks,
                                   exp.ci)   # issue 14: the spec's confidence level
        # issue 14: a min RTT below propagation + one packet's transmission time is not a data packet's; say so
        entry["min_rtt_floor_s"] = summary.min_rtt_floor(exp.topology, topo.wire, rate)
        entry["measurement_problems"] += summary.min_rtt_problems(entry, entry["min_rtt_floor_s"])
        entry["warnings"] = summary.trace_warnings(flows, sampler_of)
        entry["kernel_fault"] = summary.kernel_faults(flows, sampler_of)   # issue 16: samples law checks leave out
        entry["fidelity"] = monitor.verdict(self.samplers, TRACE_PERIOD)   # issue 17
        fidelity.judge_delay(entry["fidelity"], entry, topo, flows, lines)   # the delay the run had, measured
        entry.update(summary.by_kind(flows, results))   # e.g. files flows: each transfer's completion time
        self.sinks.publish(source_samples(labels, entry, flows, time.time()))   # the packet sources' own numbers
        entry.update(inside)
        entry["warnings"] += [x[k] for x in inside.values() for k in ("warning", "note") if k in x]
        if self.pause is not None:
            entry["pause"] = self.pause.summary()
        links = self.links.drops()[2]   # issue 15: each drop point's totals (BPF or netem); failed link events
        if links:
            entry["links"] = links
        entry["warnings"] += self.links.errors
        for w in entry["warnings"]:
            print(f"warning: point {point.index} repetition {rep}: {w}")
        return entry

    def _wait_samples(self, until: float, t0: float) -> list[str]:
        """Sleeps until `until` (seconds since t0) and until every live sampler has reported past it, at most 1 s
        longer. Returns the nodes whose sampler is still late then (issue 14: the interval is degraded)."""
        deadline = t0 + until + 1.0
        late = []
        while time.time() < deadline:
            late = [s for s in self.samplers if s.proc.poll() is None and (s.latest_time() or -1) < until - GRACE]
            if time.time() - t0 >= until and not late:
                break
            time.sleep(0.01)
        # issue 16: a sampler process that ended mid-run fails the repetition (its flows would measure nothing);
        # a UDP flow's receiver (ReceiverLog) may end with its flow, so it counts only when it is late
        dead = [s for s in self.samplers if s.proc.poll() is not None
                and (not isinstance(s, ReceiverLog) or time.time() >= deadline)]
        if dead:
            raise RunError(f"the TCP_INFO sampler on {dead[0].node} stopped (exit status {dead[0].proc.returncode})"
                           f": {dead[0].error() or 'no message'}")
        return [str(s.node) for s in late]

    def _with_links(self, q: dict) -> dict:
        """Issue 15: the bottleneck's totals with the links' drops (BPF random loss and outages) added: every
        drop counts into the system loss, and a drop before the bottleneck into the packets offered too."""
        dropped, before, per = self.links.drops()
        return {**q, "dropped": q["dropped"] + dropped, "offered": q["offered"] + before, "link_dropped": dropped,
                "per_link": per}

    @staticmethod
    def _qdisc_totals(queues: list[QdiscReader], upstream: list[bool], tables: RepetitionTables, t: float) -> dict:
        """Every queue's statistics at t, into qdisc.csv. The system's drops are all their roots' drops; the
        packets offered are the bottleneck's (sent + dropped) plus what a queue before it dropped (never offered
        to it). `rows` stays the bottleneck's (the fidelity monitor's), `all_rows` every queue's."""
        per = [r.read() for r in queues]
        rows = [row for rs in per for row in rs]
        tables.qdisc_rows(rows, t)
        dropped = offered = 0.0
        for i, rs in enumerate(per):
            root = next((r for r in rs if r.get("parent") in ("root", None) and not r.get("class")),
                        rs[0] if rs else {})
            d = float(root.get("dropped", 0))
            dropped += d
            if i == 0:
                offered += d + float(root.get("sent_packets", 0))
            elif upstream[i]:
                offered += d
        return {"dropped": dropped, "offered": offered, "rows": per[0] if per else [], "all_rows": rows}

    # --- teardown ------------------------------------------------------------------------------------
    def _teardown(self) -> None:
        # a second Ctrl-C must not cut the teardown short: it is noted and raised once everything is gone
        with signals.deferred(self._remaining):
            if self.traffic is not None:
                self.traffic.stop()
                self.traffic = None
            for s in self.samplers:
                s.stop()
            self.samplers = []
            if self.pause is not None:
                self.pause.stop()
                self.pause = None
            if self.inside is not None:
                self.inside.close()
                self.inside = None
            if self.sender_tcp is not None:   # issue 15: each owner restores what it changed
                self.sender_tcp.restore()
                self.sender_tcp = None
            if self.links is not None:
                self.links.close()
                self.links = None
            if self.testbed is not None:
                self.testbed.down()
                self.testbed = None

    def _remaining(self) -> str:
        """What the teardown still has to remove (issue 17: said on a second Ctrl-C)."""
        parts = [what for what, there in (("the flows' programs", self.traffic), ("the samplers", self.samplers),
                                          ("PAUSE", self.pause), ("the link events", self.links)) if there]
        if self.testbed is not None:
            parts.append(f"the {self.exp.testbed} testbed ({self.opt.prefix}-*)")
        if self.sinks is not None:
            parts.append("the sample log and exporter")
        if self.cc is not None:
            parts.append("the congestion controls")
        return ", ".join(parts) or "the run's records"


MIN_FREE = 16 * 2**20   # bytes: a short run's archive is well under it; less means the disk is full in all but name


def archive_room(out_root: Path) -> None:
    """Raises InputError unless a run directory can be made under out_root and there is room to write it (issue
    16). Makes nothing: the nearest folder that exists is tried with a file made and removed at once."""
    where = out_root
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
        st = os.statvfs(where)
    except OSError as e:
        raise InputError(f"--out {out_root}: cannot write a run directory there ({e.strerror})") from None
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE:
        raise InputError(f"--out {out_root}: only {free / 2**20:.1f} MiB free there; a run needs at least "
                         f"{MIN_FREE // 2**20} MiB")
