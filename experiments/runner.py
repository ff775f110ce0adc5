"""The runner: spec -> points (sweep x repetitions) -> for each: preflight, testbed up, traffic, sampling every
interval into metrics, the exporter and the archive -> testbed down, always.

    for point in sweep:
        for rep in repetitions:
            testbed.up(topology) -> iperf3 servers -> samplers -> clients
            every interval: counters -> metrics -> intervals.csv + Prometheus
            clients done -> iperf3 cross-check -> testbed.down()     (also on error and Ctrl-C)
        summary.json += the point (mean of interval means, std, 95 % CI; repetitions on top)
"""
from __future__ import annotations

import os
import platform
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ccrig.analysis import metrics, stats
from ccrig.analysis.intervals import FlowSeries, flow_interval, system_interval
from ccrig.qdiscs.shaper import LEAF
from ccrig.topologies.testbeds.netns import NetnsTestbed
from ccrig.topologies.testbed import Testbed
from ccrig import machine
from . import spec as specmod
from .archive import INTERVAL_COLUMNS, QDISC_COLUMNS, TRACE_COLUMNS, CsvTable, RunArchive, new_run_dir
from .collectors import FlowSampler, QdiscReader
from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.needs import Need
from ccrig.samples import Sample
from .exporter import SERIES, Exporter, qdisc_samples, series_sample
from .preflight import needs
from .backfill import LOG_NAME, SampleLog
from .prometheus_server import PrometheusServer
from . import pause_run
from .workloads import Traffic, make_flow, transfers

METRICS = ["goodput_bps", "throughput_bps", "eee", "uar", "loss", "retrans_rate", "rtt_s", "min_rtt_s"]
TRACE_PERIOD = 0.02   # seconds: congestion events are shorter than an interval
GRACE = 0.1           # seconds past a boundary before its interval is computed (a sample past it must arrive)


class Interrupted(Exception):
    """SIGINT or SIGTERM: stop, tear down, keep what was measured."""


def run_prefix() -> str:
    return f"ccrig-{os.getpid()}"


def make_testbed(name: str, topology, commands: Commands, prefix: str, exp=None) -> Testbed:
    """The testbed a spec names. Each lives in topologies/ and is imported only when used."""
    if name == "netns":
        return NetnsTestbed(topology, commands, prefix)
    if name == "mininet":
        try:
            from ccrig.topologies.testbeds.mininet import MininetTestbed
        except ImportError as e:
            raise InputError(f"testbed: got 'mininet', which is not available here: {e}") from None
        return MininetTestbed(topology, commands, prefix, exp)
    if name == "hosts":
        from ccrig.topologies.testbeds.hosts import HostsTestbed
        # the inventory maps topology nodes to hosts: --inventory or $CCRIG_INVENTORY
        return HostsTestbed(topology, commands, prefix)
    raise InputError(f"testbed: got {name!r}; expected netns, mininet, hosts, vm or auto")


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
        self.exporter: Exporter | None = None
        self.prom_url: str | None = None
        self.target: Path | None = None
        self.testbed: Testbed | None = None
        self.traffic: Traffic | None = None
        self.samplers: list[FlowSampler] = []
        self.pause: pause_run.PauseRun | None = None

    # --- the whole run ----------------------------------------------------------------------------------
    def preflight(self) -> None:
        missing = [n for n in needs(self.points, self.commands, self.opt.prefix) if not n.ok]
        # what Mininet needs (its tools, the switch kind), asked without setting anything up; the hosts
        # testbed's hosts were checked over SSH in needs() (preflight._hosts: reachable, root, interfaces,
        # tools, their kernels' qdiscs, PAUSE)
        exp = self.points[0].experiment
        if exp.testbed == "mininet":
            bed = make_testbed(exp.testbed, exp.topology.build(exp.n_flows), self.commands, self.opt.prefix, exp)
            missing += [Need("the mininet testbed", "testbed", False, why) for why in bed.preflight()]
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
        old = _trap_signals()
        try:
            self._load_ccs()
            self._start_prometheus()
            total = len(self.points) * self.exp.repetitions * (2 if self.exp.pause_gain else 1)
            with _progress(self.opt.progress, total * self.exp.n_intervals) as bar:
                self.bar = bar
                for point in self.points:
                    reps = []
                    for rep in range(point.experiment.repetitions):
                        reps.append(self.run_repetition(point, rep))
                    self.summary["points"].append(self.summarize_point(point, reps))
                    pause_run.complete_point(self, point, self.summary["points"][-1])
                    self.archive.write_json("summary.json", self.summary)
                    self._publish_summary(self.summary["points"][-1])
            self.summary["complete"] = True
            self.archive.write_json("summary.json", self.summary)
        finally:
            with _signals_deferred():
                self._stop_prometheus()
                self._release_ccs()
            _restore_signals(old)
        return RunResult(run_dir, self.summary, self.prom_url)

    def _load_ccs(self) -> None:
        """Loads the congestion controls every point needs (modules or BPF), once for the whole run. On the
        hosts testbed each flow's law is loaded on its sender's host, under that host's own name (iperf3's
        server only tries the sender's name on its socket and carries on without it; a receiver sends no
        data), over SSH connections of their own kept for the whole run: each repetition's testbed connects
        and disconnects, the laws outlive it."""
        from ccrig.tcp_modules.manager import CcSet, RemoteSystem
        hosts = self.exp.testbed == "hosts"
        ccs: dict = {}   # the sender node on hosts (None: this machine) -> its flows' cc values
        for p in self.points:
            e = p.experiment
            topo = e.topology.build(e.n_flows)
            for i, f in enumerate(e.flow_list()):
                ccs.setdefault(topo.pairs[i % len(topo.pairs)][0] if hosts else None, []).append(f.cc)
        systems = {None: None}
        if hosts:
            from ccrig.topologies.testbeds.hosts import NodeConnections
            self.cc_hosts = NodeConnections(list(ccs), self.commands, self.opt.prefix)
            problems = self.cc_hosts.open()
            if problems:
                raise InputError("hosts testbed: " + "; ".join(problems))
            systems = {n: RemoteSystem.of(self.cc_hosts.hosts[n], c) for n, c in self.cc_hosts.conns.items()}
        self.cc = CcSet(self.commands, self.opt.prefix, self.exp.cc_form, systems)
        self.cc.prepare(ccs)
        self.env["congestion_controls"] = self.cc.describe()
        self.archive.write_json("env.json", self.env)

    def _release_ccs(self) -> None:
        try:
            if getattr(self, "cc", None) is not None:
                left = self.cc.release()
                if left:
                    print(f"warning: could not remove congestion control(s) {', '.join(left)}; run `ccrig clean`"
                          + (" -i INVENTORY" if getattr(self, "cc_hosts", None) is not None else ""))
        finally:
            if getattr(self, "cc_hosts", None) is not None:
                self.cc_hosts.close()

    # --- one repetition of one point ------------------------------------------------------------------
    def run_repetition(self, point: specmod.Point, rep: int, out: Path | None = None) -> dict:
        exp = point.experiment
        topo = exp.topology.build(exp.n_flows)
        out = out or self.archive.rep_dir(point.index, rep)
        pairs = [topo.pairs[i % len(topo.pairs)] for i in range(exp.n_flows)]
        # the kernel's name for the flow's law on its sender (per host on the hosts testbed)
        flows = [make_flow(f.workload, i, self.cc.kernel_name(pairs[i][0], f.cc_label), f.cc_label, *pairs[i],
                           start=f.start, duration=exp.duration)
                 for i, f in enumerate(exp.flow_list())]
        self.testbed = make_testbed(exp.testbed, topo, self.commands, self.opt.prefix, exp)
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

    def _measure(self, point, rep, topo, flows, out: Path) -> dict:
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
        tables = {"intervals": CsvTable(out / "intervals.csv", INTERVAL_COLUMNS),
                  "qdisc": CsvTable(out / "qdisc.csv", QDISC_COLUMNS)}
        labels = {"experiment": self.exp.name, "run": self.run_id, "point": str(point.index), "rep": str(rep),
                  "qdisc": exp.topology.bottleneck.qdisc.label() if hasattr(exp.topology, "bottleneck") else "",
                  **(self.pause.labels() if self.pause else {})}
        pending = sorted(flows, key=lambda f: f.start)
        qdisc_prev = self._qdisc_totals(bottleneck.read(), tables["qdisc"], 0.0)
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
                q = self._qdisc_totals(bottleneck.read(), tables["qdisc"], time.time() - t0)
                self._wait_samples(boundary + GRACE, t0)
                a, b = boundary - exp.interval, boundary
                rows = []
                for f in flows:
                    snd = FlowSeries(sampler_of[f.sender_key].snapshot(f.sender_key))
                    row = flow_interval(snd, a, b, share)
                    rows.append(row)
                    rows_by_flow[f.index].append(row)
                    tables["intervals"].write({"interval": k - 1, "t_start": a, "t_end": b, "flow": f.index,
                                               "cc": f.label, **row})
                sysrow = system_interval(rows, t_max, q["dropped"] - qdisc_prev["dropped"],
                                         q["offered"] - qdisc_prev["offered"])
                qdisc_prev = q
                system_rows.append(sysrow)
                tables["intervals"].write({"interval": k - 1, "t_start": a, "t_end": b, "flow": "all", "cc": "",
                                           **sysrow})
                tables["intervals"].flush()
                self._publish_interval(labels, flows, rows, sysrow, q, t0 + b,
                                       self.pause.samples(labels, t0 + b) if self.pause else [])
                self.bar.advance()
            # the clients end on their own; their sockets' final counters close the trace
            self.traffic.wait(timeout=exp.duration + 30)
            time.sleep(2 * TRACE_PERIOD)
        finally:
            for t in tables.values():
                t.close()
            for s in self.samplers:
                s.stop()
        self._write_trace(out, flows, sampler_of)
        iperf = self.traffic.results()
        checks = self._cross_check(flows, sampler_of, iperf)
        summary = self._rep_summary(flows, rows_by_flow, system_rows, exp.warmup, t_max, share, checks)
        summary["warnings"] = self._trace_warnings(flows, sampler_of)
        if (files := transfers(flows, out)) is not None:
            summary["transfers"] = files   # files flows: each transfer's completion time
        if self.pause is not None:
            summary["pause"] = self.pause.summary()
        for w in summary["warnings"]:
            print(f"warning: point {point.index} repetition {rep}: {w}")
        return summary

    def _trace_warnings(self, flows, sampler_of) -> list[str]:
        """Kernel faults that make a flow's numbers unreliable. On some kernels (seen on 6.18) a BPF
        congestion control's ssthresh callback now and then leaves ssthresh at a garbage value above
        TCP_INFINITE_SSTHRESH, and the kernel then grows cwnd to ~1e9: flag it rather than hide it."""
        out = []
        for f in flows:
            bad = [s.get("snd_ssthresh", 0) for _, s in sampler_of[f.sender_key].snapshot(f.sender_key)
                   if s.get("snd_ssthresh", 0) > 0x7FFFFFFF]
            if bad:
                out.append(f"flow {f.index} ({f.label}): ssthresh {bad[0]} is beyond the kernel's infinity; "
                           f"its cwnd and rates after that are not the law's (a kernel fault with BPF congestion "
                           f"control on {platform.release()})")
        return out

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

    def _qdisc_totals(self, rows: list[dict], table: CsvTable, t: float) -> dict:
        for r in rows:
            table.add_columns(r)
            table.write({"t": t, **r})
        table.flush()
        root = next((r for r in rows if r.get("parent") in ("root", None) and not r.get("class")),
                    rows[0] if rows else {})
        dropped = float(root.get("dropped", 0))
        return {"dropped": dropped, "offered": dropped + float(root.get("sent_packets", 0)), "rows": rows}

    def _write_trace(self, out: Path, flows, sampler_of) -> None:
        table = CsvTable(out / "trace.csv", TRACE_COLUMNS)
        for f in flows:
            for t, s in sampler_of[f.sender_key].snapshot(f.sender_key):
                table.write({"t": t, "flow": f.index, "cwnd": s.get("snd_cwnd"), "ssthresh": s.get("snd_ssthresh"),
                             "srtt_s": s.get("rtt_us", 0) / 1e6, "bytes_acked": s.get("bytes_acked"),
                             "bytes_sent": s.get("bytes_sent"), "ca_state": s.get("ca_state"),
                             "total_retrans": s.get("total_retrans")})
        table.close()

    def _cross_check(self, flows, sampler_of, iperf: dict[int, dict]) -> list[dict]:
        """Per flow: the sender's bytes_acked and the receiver's bytes_received against iperf3's own count,
        and the congestion control the socket really used."""
        out = []
        for f in flows:
            snd = sampler_of[f.sender_key].snapshot(f.sender_key)
            rcv = sampler_of[f.receiver_key].snapshot(f.receiver_key)
            acked = max((s.get("bytes_acked", 0) for _, s in snd), default=0)
            received = max((s.get("bytes_received", 0) for _, s in rcv), default=0)
            ip = iperf[f.index]["end"]["sum_received"]["bytes"] if f.index in iperf else None  # files: no iperf3
            # iperf3 sets the congestion control once the socket exists, so the first samples may show
            # the namespace's default; the one that carried the data is the last
            used = next((s["cc"] for _, s in reversed(snd) if s.get("cc")), None)
            if used is not None and used != f.cc:
                raise RunError(f"flow {f.index} asked for congestion control {f.cc!r} but its socket used {used!r}")
            out.append({"flow": f.index, "collector_bytes_acked": acked, "receiver_bytes_received": received,
                        "iperf3_bytes_received": ip,
                        "collector_vs_iperf3": acked / ip - 1 if ip else None,
                        "receiver_vs_iperf3": received / ip - 1 if ip else None})
        return out

    def _rep_summary(self, flows, rows_by_flow, system_rows, warmup, t_max, share, checks) -> dict:
        def stat(rows, name):
            return stats.summarize(stats.measured([r[name] for r in rows], warmup))
        system = {m: stat(system_rows, m) for m in METRICS + ["jain"]}
        per_flow = []
        for f in flows:
            entry = {"flow": f.index, "cc": f.label, "kernel_cc": f.cc, "sender": f.sender, "receiver": f.receiver}
            entry.update({m: stat(rows_by_flow[f.index], m) for m in METRICS})
            per_flow.append(entry)
        return {"system": system, "flows": per_flow, "t_max_bps": t_max, "fair_share_bps": share,
                "cross_check": checks}

    def summarize_point(self, point: specmod.Point, reps: list[dict]) -> dict:
        system = {m: stats.over_repetitions([r["system"][m] for r in reps]) for m in METRICS + ["jain"]}
        flows = []
        for i, f in enumerate(reps[0]["flows"]):
            entry = {k: f[k] for k in ("flow", "cc", "kernel_cc", "sender", "receiver")}
            entry.update({m: stats.over_repetitions([r["flows"][i][m] for r in reps]) for m in METRICS})
            flows.append(entry)
        return {"index": point.index, "params": point.params, "t_max_bps": reps[0]["t_max_bps"],
                "fair_share_bps": reps[0]["fair_share_bps"], "system": system, "flows": flows,
                "repetitions": [{"rep": i, **r} for i, r in enumerate(reps)]}

    # --- teardown ------------------------------------------------------------------------------------
    def _teardown(self) -> None:
        # a second Ctrl-C must not cut the teardown short: it is noted and raised once everything is gone
        with _signals_deferred():
            self._teardown_now()

    def _teardown_now(self) -> None:
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

    # --- Prometheus ----------------------------------------------------------------------------------
    def _start_prometheus(self) -> None:
        labels = {"experiment": self.exp.name, "run": self.run_id}
        info = [Sample("run_info", {**labels, "kernel": self.env["kernel"]["release"], "testbed": self.exp.testbed},
                       1.0)]
        # every run keeps what it exports in the archive, so it can be backfilled into any Prometheus later
        # (the vm testbed's guest has no Prometheus of its own)
        self.sample_log = SampleLog(self.archive.path / LOG_NAME)
        self.sample_log.set_info(info)
        self.sinks = [self.sample_log]
        if self.opt.prometheus == "off":
            return
        self.exporter = Exporter()
        self.sinks.append(self.exporter)
        if self.opt.prometheus == "auto":
            server = PrometheusServer(self.opt.prometheus_root, self.commands)
            self.prom_url = server.ensure(self.exp.interval)
            self.target = server.add_target(self.exp.interval, self.run_id, self.exporter.address, {})
        else:
            self.prom_url = self.opt.prometheus.rstrip("/")
            sd = os.environ.get("CCRIG_PROMETHEUS_TARGETS")
            if sd:
                self.target = Path(sd) / f"{self.run_id}.json"
                self.target.write_text(f'[{{"targets": ["{self.exporter.address}"]}}]\n')
        self.exporter.set_info(info)
        self.env["prometheus"] = {"url": self.prom_url, "exporter": self.exporter.address}
        self.archive.write_json("env.json", self.env)

    def _stop_prometheus(self) -> None:
        if getattr(self, "sample_log", None) is not None:
            self.sample_log.close()
        if self.exporter is None:
            return
        # Prometheus must take the last batches before the exporter goes away
        if not self.exporter.drain(timeout=4 * self.exp.interval + 5):
            print(f"warning: Prometheus did not scrape the run's last samples; they are in {self.archive.path}")
        if self.target is not None:
            self.target.unlink(missing_ok=True)
        self.exporter.close()

    def _publish(self, samples: list[Sample]) -> None:
        for sink in getattr(self, "sinks", []):
            sink.publish(samples)

    def _publish_interval(self, labels, flows, rows, sysrow, q, ts: float, extra=()) -> None:
        out = list(extra)
        for f, row in zip(flows, rows):
            fl = {**labels, "flow": str(f.index), "cc": f.label}
            out += [series_sample("flow", m, fl, row[m], ts) for m in METRICS + ["cwnd"] if row[m] is not None]
        out += [series_sample("system", m, labels, sysrow[m], ts) for m in METRICS + ["jain"]
                if sysrow[m] is not None]
        out += qdisc_samples(q["rows"], {k: v for k, v in labels.items() if k != "qdisc"}, ts)
        self._publish(out)

    def _publish_summary(self, point: dict) -> None:
        ts = time.time()
        base = {"experiment": self.exp.name, "run": self.run_id, "point": str(point["index"])}
        out = []
        for scope, entries in (("system", [point["system"]]), ("flow", point["flows"])):
            for e in entries:
                lab = {**base, "scope": scope, "flow": str(e.get("flow", "all")), "cc": e.get("cc", "")}
                for m in METRICS + (["jain"] if scope == "system" else []):
                    s = e[m]
                    suffix, factor = SERIES[m]
                    for stat_name, v in (("mean", s["mean"]), ("std", s["std"]), ("ci95_low", s["ci95"][0]),
                                         ("ci95_high", s["ci95"][1])):
                        if v is not None:
                            out.append(Sample("point_result", {**lab, "series": f"ccrig_{scope}_{suffix}",
                                                               "stat": stat_name}, v * factor, ts))
        self._publish(out)


# --- signals and progress --------------------------------------------------------------------------------

def _raise_interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def _trap_signals():
    if threading.current_thread() is not threading.main_thread():
        return None
    return {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}


class _signals_deferred:
    def __enter__(self):
        self.caught = []
        self.old = None
        if threading.current_thread() is threading.main_thread():
            self.old = {s: signal.signal(s, lambda n, f: self.caught.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, exc_type, *rest):
        _restore_signals(self.old)
        if self.caught and exc_type is None:
            raise Interrupted(signal.Signals(self.caught[0]).name)
        return False


def _restore_signals(old) -> None:
    if old:
        for s, h in old.items():
            signal.signal(s, h)


class _NoBar:
    def advance(self, n: int = 1) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Bar(_NoBar):
    def __init__(self, total: int):
        from rich.progress import BarColumn, Progress, TimeRemainingColumn
        self.p = Progress("[progress.description]{task.description}", BarColumn(),
                          "{task.completed}/{task.total} intervals", TimeRemainingColumn(), transient=True)
        self.task = self.p.add_task("measuring", total=total)

    def advance(self, n: int = 1) -> None:
        self.p.advance(self.task, n)

    def __enter__(self):
        self.p.start()
        return self

    def __exit__(self, *exc):
        self.p.stop()
        return False


def _progress(enabled: bool, total: int):
    return _Bar(total) if enabled else _NoBar()
