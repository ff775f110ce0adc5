"""The runner: spec -> points (sweep x repetitions) -> for each: preflight, testbed up, traffic, sampling every
interval into metrics, the sinks and the archive -> testbed down, always.

    for point in sweep:
        for rep in repetitions:
            testbed.up(topology) -> the flows' servers -> samplers -> senders, each at its start
            every interval: counters -> metrics -> intervals.csv + the sinks (sample log, Prometheus)
            senders done -> results and cross-check (summary.py) -> testbed.down()   (also on error and Ctrl-C)
        summary.json += the point (mean of interval means, std, 95 % CI; repetitions on top)

Around it: signals.py (Ctrl-C and SIGTERM), sinks.py (where samples go), summary.py (what summary.json says),
archive.py (the run's folder), workloads/ (the flows' programs), progress.py (the bar).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ccrig import machine
from ccrig.analysis import metrics
from ccrig.analysis.intervals import FlowSeries, flow_interval, system_interval
from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.needs import Need
from ccrig.qdiscs.shaper import LEAF
from ccrig.samples import Sample
from ccrig.tcp_modules.manager import CcSet, RemoteSystem
from ccrig.topologies import testbeds
from ccrig.topologies.testbed import Testbed
from ccrig.topologies.testbeds.hosts import NodeConnections
from . import pause_run, signals, summary
from . import spec as specmod
from .archive import RepetitionTables, RunArchive, new_run_dir
from .collectors import FlowSampler, QdiscReader
from .preflight import needs
from .progress import NoBar, progress
from .sinks import Sinks, interval_samples, point_samples
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
        # the congestion controls, loaded once for the whole run; on a remote testbed over connections of their own
        self.cc: CcSet | None = None
        self.cc_hosts: NodeConnections | None = None
        # one repetition's parts, torn down after it
        self.testbed: Testbed | None = None
        self.traffic: Traffic | None = None
        self.samplers: list[FlowSampler] = []
        self.pause: pause_run.PauseRun | None = None

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
        self.preflight()
        run_dir = new_run_dir(self.opt.out_root, self.exp.name)
        self.archive = RunArchive(run_dir)
        self.commands = Commands(self.archive.commands_log)
        self.archive.write_spec(self.raw)
        self.run_id = run_dir.name
        self.env = machine.host(self.commands)
        self.env["testbed"] = self.exp.testbed
        self.archive.write_json("env.json", self.env)
        self.summary = {"experiment": self.exp.name, "run": self.run_id, "kernel": self.env["kernel"]["release"],
                        "testbed": self.exp.testbed, "interval_s": self.exp.interval,
                        "intervals": self.exp.n_intervals, "warmup": self.exp.warmup,
                        "repetitions": self.exp.repetitions, "complete": False, "points": []}
        self.archive.write_json("summary.json", self.summary)
        with signals.trapped():
            try:
                self._load_ccs()
                self._open_sinks()
                total = len(self.points) * self.exp.repetitions * (2 if self.exp.pause_gain else 1)
                with progress(self.opt.progress, total * self.exp.n_intervals) as self.bar:
                    for point in self.points:
                        reps = []
                        for rep in range(point.experiment.repetitions):
                            reps.append(self.run_repetition(point, rep))
                        self.summary["points"].append(self.summarize_point(point, reps))
                        pause_run.complete_point(self, point, self.summary["points"][-1])
                        self.archive.write_json("summary.json", self.summary)
                        self.sinks.publish(point_samples({"experiment": self.exp.name, "run": self.run_id,
                                                          "point": str(point.index)}, self.summary["points"][-1]))
                self.summary["complete"] = True
                self.archive.write_json("summary.json", self.summary)
            finally:
                with signals.deferred():
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

    def summarize_point(self, point: specmod.Point, reps: list[dict]) -> dict:
        return summary.point(point, reps)

    # --- one repetition of one point ------------------------------------------------------------------
    def run_repetition(self, point: specmod.Point, rep: int, out: Path | None = None) -> dict:
        exp = point.experiment
        topo = exp.topology.build(exp.n_flows)
        out = out or self.archive.rep_dir(point.index, rep)
        pairs = [topo.pairs[i % len(topo.pairs)] for i in range(exp.n_flows)]
        # the kernel's name for the flow's law on its sender (per host on a remote testbed)
        flows = [Flow(f.workload, i, self.cc.kernel_name(pairs[i][0], f.cc_label), f.cc_label, *pairs[i],
                      start=f.start, duration=exp.duration)
                 for i, f in enumerate(exp.flow_list())]
        self.testbed = make_testbed(exp, topo, self.commands, self.opt.prefix)
        try:
            self.testbed.up()
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
        rate = topo.egress_of(*topo.bottleneck).egress.rate.bps(topo.mtu + 14)
        t_max = metrics.payload_capacity(rate, topo.mtu)
        share = t_max / len(flows)
        self.traffic = Traffic(self.testbed, flows, out)
        self.traffic.start_servers()
        by_node: dict[str, list[str]] = {}
        for f in flows:
            by_node.setdefault(f.sender, []).append(f.sender_key)
            by_node.setdefault(f.receiver, []).append(f.receiver_key)
        self.samplers = [FlowSampler(self.testbed, n, keys, TRACE_PERIOD) for n, keys in by_node.items()]
        sampler_of = {k: s for s in self.samplers for k in s.keys}
        # time starts once every sampler is polling: a Python start can take seconds on a slow (emulated) CPU
        for s in self.samplers:
            s.wait_ready(timeout=120)
        t0 = time.time()
        for s in self.samplers:
            s.t0 = t0
        leaf = topo.egress_of(*topo.bottleneck).egress.qdisc
        # a discipline with classes of its own (drr: one per flow) has them read each interval too
        bottleneck = QdiscReader(self.testbed, topo.bottleneck[0], self.testbed.egress_device(*topo.bottleneck),
                                 classes_under=LEAF if leaf is not None and leaf.kind == "drr" else None)
        tables = RepetitionTables(out)
        labels = {"experiment": self.exp.name, "run": self.run_id, "point": str(point.index), "rep": str(rep),
                  "qdisc": exp.topology.bottleneck.qdisc.label() if hasattr(exp.topology, "bottleneck") else "",
                  **(self.pause.labels() if self.pause else {})}
        pending = sorted(flows, key=lambda f: f.start)
        qdisc_prev = self._qdisc_totals(bottleneck.read(), tables, 0.0)
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
                q = self._qdisc_totals(bottleneck.read(), tables, time.time() - t0)
                self._wait_samples(boundary + GRACE, t0)
                a, b = boundary - exp.interval, boundary
                rows = []
                for f in flows:
                    snd = FlowSeries(sampler_of[f.sender_key].snapshot(f.sender_key))
                    row = flow_interval(snd, a, b, share)
                    rows.append(row)
                    rows_by_flow[f.index].append(row)
                sysrow = system_interval(rows, t_max, q["dropped"] - qdisc_prev["dropped"],
                                         q["offered"] - qdisc_prev["offered"])
                qdisc_prev = q
                system_rows.append(sysrow)
                tables.interval(k - 1, a, b, flows, rows, sysrow)
                self.sinks.publish([*(self.pause.samples(labels, t0 + b) if self.pause else []),
                                    *interval_samples(labels, flows, rows, sysrow, q["rows"], t0 + b)])
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
        checks = summary.cross_check(flows, sampler_of, results)
        entry = summary.repetition(flows, rows_by_flow, system_rows, exp.warmup, t_max, share, checks)
        entry["warnings"] = summary.trace_warnings(flows, sampler_of)
        entry.update(summary.by_kind(flows, results))   # e.g. files flows: each transfer's completion time
        if self.pause is not None:
            entry["pause"] = self.pause.summary()
        for w in entry["warnings"]:
            print(f"warning: point {point.index} repetition {rep}: {w}")
        return entry

    def _wait_samples(self, until: float, t0: float) -> None:
        """Sleeps until `until` (seconds since t0) and until every live sampler has reported past it."""
        deadline = t0 + until + 1.0
        while time.time() < deadline:
            late = [s for s in self.samplers if s.proc.poll() is None and (s.latest_time() or -1) < until - GRACE]
            if time.time() - t0 >= until and not late:
                return
            time.sleep(0.01)
        dead = [s for s in self.samplers if s.proc.poll() is not None]
        if dead:
            raise RunError(f"the TCP_INFO sampler on {dead[0].node} stopped: {dead[0].error() or 'no message'}")

    @staticmethod
    def _qdisc_totals(rows: list[dict], tables: RepetitionTables, t: float) -> dict:
        """The bottleneck's statistics at t, into qdisc.csv; its root's drops and packets offered so far."""
        tables.qdisc_rows(rows, t)
        root = next((r for r in rows if r.get("parent") in ("root", None) and not r.get("class")),
                    rows[0] if rows else {})
        dropped = float(root.get("dropped", 0))
        return {"dropped": dropped, "offered": dropped + float(root.get("sent_packets", 0)), "rows": rows}

    # --- teardown ------------------------------------------------------------------------------------
    def _teardown(self) -> None:
        # a second Ctrl-C must not cut the teardown short: it is noted and raised once everything is gone
        with signals.deferred():
            if self.traffic is not None:
                self.traffic.stop()
                self.traffic = None
            for s in self.samplers:
                s.stop()
            self.samplers = []
            if self.pause is not None:
                self.pause.stop()
                self.pause = None
            if self.testbed is not None:
                self.testbed.down()
                self.testbed = None
