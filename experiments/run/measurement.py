"""The measurement of one repetition: from the first server to the record, every interval on the clock.

    Measurement(unit, topo, flows, state, lent, parts).run() -> the record
      start:     capture and queue monitor -> the flows' servers -> one sampler per machine -> the queues' first
                 reading -> t0 (every part ready, so no interval is lost to a slow start)
      interval:  senders whose start has come; at each boundary the queues' counters, the samplers' (waited for
                 at most 1 s past the boundary), each flow's and the system's row against T_max then, the
                 fidelity monitor, the repetition's tables, the live samples
      finish:    the senders end on their own; the counters once more; every interval settled from all the
                 samples and from the counters' readings at their own times; the cross-checks, the trace, the record

T_max follows the link (analysis/capacity.py): a `rate` or `down` event on a constrained link changes what the
flows could use for the intervals it covers, and with it EEE, UAR, each flow's fair share and the fidelity
monitor's reference. Every process started here is entered into the repetition's exit stack (`parts`) as soon
as it exists, so the teardown finds it whatever happens next.
"""
from __future__ import annotations

import statistics
import time

from ccrig import fanout
from ccrig.analysis import metrics, readings, samples, stats
from ccrig.analysis.capacity import Capacity
from ccrig.analysis.counters import Counters
from ccrig.analysis.intervals import FlowSeries, system_interval
from ccrig.errors import RunError
from ccrig.qdiscs import classes_under
from ccrig.topologies import loss
from ccrig.experiments.run import fidelity, mib, summary
from ccrig.experiments.run.archive import RepetitionTables
from ccrig.experiments.run.collectors import QdiscReader, ReceiverLog, machine_samplers
from ccrig.experiments.run.inside import SYSTEM_COLUMNS as QUEUE_COLUMNS, Inside
from ccrig.experiments.telemetry.sinks import interval_samples, link_drop_samples, source_samples
from ccrig.experiments.workloads import Flow, Traffic

TRACE_PERIOD = 0.02   # seconds: congestion events are shorter than an interval
GRACE = 0.1           # seconds past a boundary before its interval is computed (a sample past it must arrive)


def capacity_of(topo, flows: list[Flow], changes) -> tuple[Capacity, float]:
    """What the flows could use over time, and the bottleneck's configured rate (bit/s on the wire). Several
    shaped queues (a parking lot), or events on other links: each flow's share is max-min fair over the links it
    crosses, the system's T_max the most the flows together could carry over them."""
    rate = topo.egress_of(*topo.bottleneck).egress.rate.bps(topo.wire)
    base = {q: metrics.payload_capacity(topo.egress_of(*q).egress.rate.bps(topo.wire), topo.mtu)
            for q in topo.queues() if topo.egress_of(*q).egress.rate is not None}
    if len(base) > 1 or any(link not in base for _, link, _ in changes):
        paths = [list(topo.path(f.sender, f.receiver)) for f in flows]
        return Capacity(base, changes, paths), rate
    return Capacity(base, changes), rate


class Measurement:
    def __init__(self, unit, topo, flows: list[Flow], state, lent, parts):
        self.unit, self.topo, self.flows, self.state, self.lent, self.parts = unit, topo, flows, state, lent, parts
        self.exp = unit.point.experiment
        self.bed = state.testbed
        self.capacity, self.rate = capacity_of(topo, flows, state.links.capacity_changes())
        self.spans = [(f.start, f.start + f.duration) for f in flows]
        self.labels = {**unit.labels, "qdisc": self.exp.topology.bottleneck.qdisc.label()
                       if hasattr(self.exp.topology, "bottleneck") else "",
                       **(state.pause.labels() if state.pause else {})}
        self.inside: Inside | None = None
        self.samplers: list = []
        self.rows_by_flow: dict[int, list[dict]] = {f.index: [] for f in flows}
        self.system_rows: list[dict] = []
        self.bounds: list[tuple] = []   # per interval: a, b, T_max, each flow's share, the queues' drops, offered
        # every reading of the queues' and links' counters: (seconds since t0, its totals by name; _counts)
        self.readings: list[tuple[float, dict]] = []
        self.drawn: list[tuple[float, float]] = []   # each interval's random loss drawn (readings.drawn_between)

    def run(self) -> dict:
        self._start()
        tables = RepetitionTables(self.unit.out)
        try:
            prev = self._begin(tables)
            for k in range(1, self.exp.n_intervals + 1):
                prev = self._interval(k, prev, tables)
                self.lent.tick()
            # the senders end on their own; their sockets' final counters close the trace
            self.traffic.wait(timeout=self.exp.duration + 30)
            time.sleep(2 * TRACE_PERIOD)
            self._read(tables)   # every count of the traffic in, for the last intervals' settling
        finally:
            tables.close()
            for s in self.samplers:
                s.stop()
        tables.trace(self.flows, self.sampler_of)
        settled = self._settle(tables)
        entry = self._record()
        entry["settled"] = settled
        return entry

    # --- start ------------------------------------------------------------------------------------------
    def _start(self) -> None:
        exp, out = self.exp, self.unit.out
        # the capture and the queue monitor see every packet of the flows, their handshakes included
        self.inside = Inside.of(exp, self.topo, self.bed, self.lent.commands, out)
        if self.inside is not None:
            self.parts.add("the capture and the queue monitor", self.inside.close)
            self.inside.start()
        self.traffic = Traffic(self.bed, self.flows, out)
        self.parts.add("the flows' programs", self.traffic.stop)
        self.traffic.start_servers()
        # one sampler per machine for every TCP flow's two sockets (UDP flows: their receiver's log)
        self.parts.add("the samplers", lambda: [s.stop() for s in self.samplers])
        tcp = [f for f in self.flows if f.workload.tcp_info]
        self.samplers = machine_samplers(self.bed, tcp, TRACE_PERIOD)
        self.samplers += [ReceiverLog(self.bed, f.receiver, f.receiver_key, [f.sender_key, f.receiver_key],
                                      out / f.workload.server_output.format(index=f.index),
                                      self.traffic.server_of(f), TRACE_PERIOD)
                          for f in self.flows if not f.workload.tcp_info]
        self.sampler_of = {k: s for s in self.samplers for k in s.keys}
        # time starts once every sampler is polling: a Python start can take seconds on a slow (emulated) CPU
        for s in self.samplers:
            s.wait_ready(timeout=120)

    def _begin(self, tables: RepetitionTables) -> dict:
        """The queues' counters before the traffic, the fidelity monitor, then t0 and the events' clock."""
        exp, topo = self.exp, self.topo
        # every queue that can drop, the bottleneck first; a discipline with classes of its own (drr: one per
        # flow) has them read each interval too
        self.queues = [QdiscReader(self.bed, a, self.bed.egress_device(a, b),
                                   classes_under=classes_under(topo.egress_of(a, b).egress.qdisc))
                       for a, b in topo.queues()]
        self.upstream = [loss.upstream(topo, loss.DropPoint(a, b)) for a, b in topo.queues()]
        self.pending = sorted(self.flows, key=lambda f: f.start)
        self.senders = [f.sender for f in self.flows if f.workload.tcp_info]   # a node once a TCP flow on it
        self.mib = mib.read(self.bed, sorted(set(self.senders)))   # their own TCP counters before the traffic
        prev = self._totals(tables, 0.0)
        self.readings.append((0.0, _counts(prev)))   # before t0, and before any traffic
        # the run certifies itself (CPU, the bottleneck's dequeue rate and queue, the sampler's lateness)
        self.monitor = fidelity.Monitor(self.rate, self.capacity.t_max(0, exp.interval), exp.warmup, prev["rows"],
                                        greedy=fidelity.greedy(topo, self.flows, exp.flows),
                                        steady=self.state.pause is None and not getattr(exp, "events", None))
        tables.intervals.add_columns(["active", "fair_share_bps", "t_max_bps", "link_dropped"])
        if exp.queue_monitor:
            tables.intervals.add_columns(list(QUEUE_COLUMNS))
        # time starts now: the queues' first reading can take seconds too (a cold first repetition in a TCG
        # guest took 15), and every interval must lie after it
        self.t0 = time.time()
        for s in self.samplers:
            s.t0 = self.t0
        self.state.links.start_clock(self.t0, self.labels)   # link events, applied on a clock of their own
        return prev

    # --- each interval ----------------------------------------------------------------------------------
    def _sleep_to(self, boundary: float) -> None:
        """Starts the flows whose time has come, then sleeps to the boundary."""
        while True:
            now = time.time() - self.t0
            while self.pending and self.pending[0].start <= now:
                self.traffic.start_client(self.pending.pop(0))
            wake = min([boundary] + [f.start for f in self.pending])
            if now >= boundary:
                return
            time.sleep(max(0.0, min(wake, boundary) - now))

    def _interval(self, k: int, prev: dict, tables: RepetitionTables) -> dict:
        exp, unit = self.exp, self.unit
        boundary = k * exp.interval
        self._sleep_to(boundary)
        q = self._read(tables)
        late = self._wait_samples(boundary + GRACE)   # samplers still late: the interval is degraded
        a, b = boundary - exp.interval, boundary
        t_max = self.capacity.t_max(a, b)
        rows, shares = [], self.capacity.shares(self.spans, a, b)
        dropped, offered = q["dropped"] - prev["dropped"], q["offered"] - prev["offered"]
        self.bounds.append((a, b, t_max, shares, dropped, offered))   # for _settle
        # T_max shared among the flows active in [a, b] only, over the links as they were then
        for f, fs, row in zip(self.flows, shares, self._flow_rows(a, b, t_max, shares)):
            row.update(active=fs is not None, fair_share_bps=fs)
            rows.append(row)
            self.rows_by_flow[f.index].append(row)
        sysrow = system_interval(rows, t_max, dropped, offered)
        sysrow["link_dropped"] = q["link_dropped"] - prev["link_dropped"]
        sysrow["t_max_bps"] = t_max
        # an interval computed while a sampler was more than 1 s late (stale counters) is marked degraded, said,
        # and counted
        for r in [*rows, sysrow]:
            r["degraded"] = bool(late)
        if late:
            print(f"warning: point {unit.point.index} repetition {unit.rep} interval {k - 1}: the sampler on "
                  f"{', '.join(late)} is more than 1 s late; the interval is computed from stale counters and "
                  f"marked degraded")
        monitored, queue_samples = (self.inside.interval(k - 1, a, b, self.t0, self.labels)
                                    if self.inside is not None else ({}, []))
        sysrow.update(monitored)
        self.system_rows.append(sysrow)
        self.monitor.interval(k - 1, exp.interval, sysrow["goodput_bps"], q["rows"], t_max=t_max,
                              rate_bps=self.rate * self._bottleneck_share(a, b))
        tables.interval(k - 1, a, b, self.flows, rows, sysrow)
        pause = self.state.pause
        self.lent.publish([*(pause.samples(self.labels, self.t0 + b) if pause else []),
                           *interval_samples(self.labels, self.flows, rows, sysrow, q["all_rows"], self.t0 + b),
                           *link_drop_samples(self.labels, q["per_link"], self.t0 + b),
                           *self.state.links.applied(), *queue_samples])
        return q

    def _flow_rows(self, a: float, b: float, t_max: float, shares: list) -> list[dict]:
        """Each flow's row over [a, b] from the samples its sender's sampler holds now (a UDP kind's own rows)."""
        return [f.workload.interval(FlowSeries(self.sampler_of[f.sender_key].window(f.sender_key, a, b)), a, b,
                                    fs or t_max) for f, fs in zip(self.flows, shares)]

    def _settle(self, tables: RepetitionTables) -> dict:
        """Every interval's flow rows, and the system's sums of them, again from all the samples the samplers took
        (the traffic is over and they have stopped): a live row reads what had arrived by its boundary, and a
        sample that came after it is in neither interval's counters. Study 000 run T (2026-12-03): one
        repetition's live rows held 0.25 of what its sockets acked, its fidelity ok; over a run's 546
        repetitions the live system goodput was off by 0.05 % at the median and 1.3 % at the 99th percentile,
        against PAUSE gains of a point. The queues' and links' counts likewise, from their readings at the times
        they were taken (analysis/counters.py), not at the boundary a late loop read them for. Prometheus keeps the
        live values (they were published then); intervals.csv, the summary and the fidelity monitor take these.
        Returns how much they moved, and how late and far apart the counters' readings were."""
        moved, self.drawn = [], []
        c = Counters(self.readings)
        p = {name: x.get("p") for name, x in (self.readings[-1][1].get("per_link") or {}).items()}
        links = lambda t: {name: {"dropped": c.at(f"{name}:dropped", t), "passed": c.at(f"{name}:passed", t),
                                  "p": p[name]} for name in p}
        for i, (a, b, t_max, shares, _, _) in enumerate(self.bounds):
            dropped, offered = c.between("dropped", a, b), c.between("offered", a, b)
            self.bounds[i] = (a, b, t_max, shares, dropped, offered)
            rows = [self.rows_by_flow[f.index][i] for f in self.flows]
            for row, again in zip(rows, self._flow_rows(a, b, t_max, shares)):
                row.update(again)
            sysrow, live = self.system_rows[i], self.system_rows[i]["goodput_bps"]
            sysrow.update(system_interval(rows, t_max, dropped, offered))
            sysrow["link_dropped"] = c.between("link_dropped", a, b)
            self.drawn.append(readings.drawn_between(links(a), links(b)))
            self.monitor.rows[i].update(goodput_bps=sysrow["goodput_bps"],
                                        dequeue_bps=8 * c.between("sent_bytes", a, b) / (b - a),
                                        dropped=c.between("root_dropped", a, b),
                                        backlog_packets=c.nearest(b)["backlog_packets"])
            moved.append(abs(sysrow["goodput_bps"] - live) / sysrow["goodput_bps"] if sysrow["goodput_bps"] else
                         float(live > 0))
        tables.rewrite_intervals(self.flows, self.bounds, self.rows_by_flow, self.system_rows)
        late = [t - k * self.exp.interval for k, (t, _) in enumerate(self.readings[:-1]) if k]
        return {"intervals_moved": sum(m > 0 for m in moved), "largest_goodput_change": round(max(moved, default=0), 6),
                "counters_latest_s": round(max(late, default=0.0), 3), "counters_gap_s": round(c.gap(), 3)}

    def _bottleneck_share(self, a: float, b: float) -> float:
        """The bottleneck's capacity over [a, b] as a share of its own (1 unless an event changed it)."""
        own, now = self.capacity.base.get(self.topo.bottleneck), self.capacity.link(self.topo.bottleneck, a, b)
        return now / own if own else 1.0

    def _wait_samples(self, until: float) -> list[str]:
        """Sleeps until `until` (seconds since t0) and until every live sampler has reported past it, at most 1 s
        longer. Returns the nodes whose sampler is still late then (the interval is degraded)."""
        deadline = self.t0 + until + 1.0
        late = []
        while time.time() < deadline:
            late = [s for s in self.samplers if s.proc.poll() is None and (s.latest_time() or -1) < until - GRACE]
            if time.time() - self.t0 >= until and not late:
                break
            time.sleep(0.01)
        # a sampler process that ended mid-run fails the repetition (its flows would measure nothing); a UDP
        # flow's receiver (ReceiverLog) may end with its flow, so it counts only when it is late
        dead = [s for s in self.samplers if s.proc.poll() is not None
                and (not isinstance(s, ReceiverLog) or time.time() >= deadline)]
        if dead:
            raise RunError(f"the TCP_INFO sampler on {dead[0].node} stopped (exit status {dead[0].proc.returncode})"
                           f": {dead[0].error() or 'no message'}")
        return [str(s.node) for s in late]

    def _read(self, tables: RepetitionTables) -> dict:
        """The counters now (_totals), kept with the time they were read."""
        t = time.time() - self.t0
        q = self._totals(tables, t)
        self.readings.append((t, _counts(q)))
        return q

    def _totals(self, tables: RepetitionTables, t: float) -> dict:
        """Every queue's statistics at t, into qdisc.csv, with the links' drops (BPF random loss and outages).
        The system's drops are all the roots' drops and the links'; the packets offered are the bottleneck's
        (sent + dropped) plus what a queue or link before it dropped (never offered to it). `rows` stays the
        bottleneck's (the fidelity monitor's), `all_rows` every queue's."""
        # every queue read at once: their counters taken at nearly the same instant, and a round of tc processes
        # (two per queue with classes) no longer one after another (a TCG guest's 3-queue tandem: 3-5 s a round
        # against a 1 s interval)
        per = fanout.each(QdiscReader.read, self.queues)
        rows = [row for rs in per for row in rs]
        tables.qdisc_rows(rows, t)
        dropped = offered = 0.0
        for i, rs in enumerate(per):
            root = fidelity.root_row(rs)
            d = float(root.get("dropped", 0))
            dropped += d
            if i == 0:
                offered += d + float(root.get("sent_packets", 0))
            elif self.upstream[i]:
                offered += d
        link_dropped, before, per_link = self.state.links.drops()
        return {"dropped": dropped + link_dropped, "offered": offered + before, "link_dropped": link_dropped,
                "per_link": per_link, "rows": per[0] if per else [], "all_rows": rows}

    # --- the record -------------------------------------------------------------------------------------
    def _record(self) -> dict:
        exp, unit, flows = self.exp, self.unit, self.flows
        results = self.traffic.results()
        counted = mib.delta(self.mib, mib.read(self.bed, list(self.mib)))   # how each sender's kernel recovered
        lines = self.bed.stop_lines()   # each delay line's counters: how late its frames left
        checks = summary.cross_check(flows, self.sampler_of, results)
        inside = self.inside.stop(flows, self.sampler_of) if self.inside is not None else {}
        a, b = exp.warmup * exp.interval, exp.n_intervals * exp.interval
        t_max = self.capacity.t_max(a, b) if b > a else self.capacity.t_max(0, exp.duration)
        share = statistics.fmean(x or 0.0 for x in self.capacity.shares([(0, exp.duration)] * len(flows),
                                                                         *((a, b) if b > a else (0, exp.duration))))
        # the intervals the kernel's BPF fault touched leave every flow's and the system's means (analysis/samples)
        faults = summary.kernel_faults(flows, self.sampler_of)   # and the samples law checks leave out
        excluded = samples.fault_exclusion(faults, exp.interval, exp.warmup, len(self.system_rows))
        for i in (excluded or {}).get("intervals", []):
            for r in [self.system_rows[i], *(rows[i] for rows in self.rows_by_flow.values() if i < len(rows))]:
                r["fault"] = True
        entry = summary.repetition(flows, self.rows_by_flow, self.system_rows, exp.warmup, t_max, share, checks,
                                   exp.ci)
        # an on/off source's phases apart (summary.by_phase): its own schedule against the intervals' clock
        entry.update(summary.by_phase(flows, results, self.t0, exp.interval, exp.warmup, self.rows_by_flow,
                                      self.system_rows, exp.ci))
        entry["sender_mib"] = counted
        # the random loss the measured window drew against its p, for a study that adjusts for it (analysis/
        # samples.py): over every measured interval, the fault's too, a window no drop chose (a fault strikes on a
        # loss, so leaving its intervals out would leave the draw's mean off 0)
        window = self.drawn[exp.warmup:]
        offered = sum(n for _, n in window)
        if offered:
            entry["loss_drawn"] = {"value": sum(x for x, _ in window) / offered, "offered": offered,
                                   "from_interval": exp.warmup}
        # each flow's least RTT from its data packets, held to the physical floor (summary.data_min_rtt)
        for e, f in zip(entry["flows"], flows):
            if f.workload.tcp_info and self.senders.count(f.sender) == 1:
                e["sender_mib"] = counted.get(f.sender, {})   # its machine's counts are its own
            trace = self.sampler_of[f.sender_key].snapshot(f.sender_key)
            e["data_min_rtt_s"] = summary.data_min_rtt(trace, a, b)
            e["handshake_retransmitted"] = summary.handshake_retransmitted(trace)
        busy = ((entry["system"].get("throughput_bps") or {}).get("mean") or 0.0) >= summary.BUSY * t_max
        entry["min_rtt_floor_s"] = summary.min_rtt_floor(exp.topology, self.topo.wire, self.rate if busy else 0.0)
        entry["measurement_problems"] += summary.min_rtt_problems(entry, entry["min_rtt_floor_s"])
        entry["warnings"] = summary.trace_warnings(flows, self.sampler_of)
        if self.traffic.unreported:   # kept, measured by their sockets (Traffic.wait)
            entry["unreported"] = {str(i): why for i, why in self.traffic.unreported.items()}
            entry["warnings"] += [f"flow {i}: {why}" for i, why in self.traffic.unreported.items()]
        entry["kernel_fault"] = faults
        if excluded is not None:
            entry["fault_exclusion"] = excluded
        entry["fidelity"] = self.monitor.verdict(self.samplers, TRACE_PERIOD)
        mins = {i: [r["min_rtt_s"] for r in stats.measured(rows, exp.warmup) if r.get("min_rtt_s") is not None]
                for i, rows in self.rows_by_flow.items()}
        fidelity.judge_delay(entry["fidelity"], entry, self.topo, flows, lines, mins,   # the delay it had, measured
                             self.state.probed)
        entry.update(summary.by_kind(flows, results))   # e.g. files flows: each transfer's completion time
        self.lent.publish(source_samples(self.labels, entry, flows, time.time()))   # the sources' own numbers
        entry.update(inside)
        entry["warnings"] += [x[k] for x in inside.values() for k in ("warning", "note") if k in x]
        if self.state.pause is not None:
            entry["pause"] = self.state.pause.summary()
            self.state.pause.judge(entry["fidelity"], entry["pause"], b - a)
        links = self.state.links.drops()[2]   # each drop point's totals (BPF or netem); failed link events
        if links:
            entry["links"] = links
        entry["warnings"] += self.state.links.errors
        entry["exclusions"] = samples.exclusions(entry)   # what a verdict leaves out of this repetition, and why
        for w in entry["warnings"]:
            print(f"warning: point {unit.point.index} repetition {unit.rep}: {w}")
        return entry


def _counts(q: dict) -> dict[str, float]:
    """One reading of the counters (Measurement._totals) as totals by name, for analysis.counters: the system's
    drops and packets offered, the links' drops, each drop point's dropped and passed, the bottleneck's bytes sent,
    drops and backlog (the fidelity monitor's)."""
    out = {"dropped": q["dropped"], "offered": q["offered"], "link_dropped": q["link_dropped"]}
    for name, x in (q.get("per_link") or {}).items():
        out[f"{name}:dropped"], out[f"{name}:passed"] = x.get("dropped", 0), x.get("passed", 0)
    b = fidelity.bottleneck_counts(q["rows"])
    out.update(sent_bytes=b["sent_bytes"], root_dropped=b["dropped"], backlog_packets=b["backlog_packets"])
    out["per_link"] = q.get("per_link") or {}
    return out
