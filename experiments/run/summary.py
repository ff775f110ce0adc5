"""What summary.json says of a repetition and of a point, assembled from the interval rows and the samplers.

A repetition: per metric the mean of its measured interval means, their spread and a confidence interval that
holds (analysis.stats.confidence: batch means within the run), for the system and each flow; the
cross-check of the kernel's byte counts against the workload program's own; the faults seen in the trace; what
each workload kind adds (files: `transfers`). A point: the same metrics over its repetitions (Student's t over
the repetitions' means when there are two or more), and the repetitions themselves.

Every metric is {"mean", "std", "n", "ci95", "ci"}: `ci` is the analysis.stats.Ci as a dict (method runs |
batches | none, level, n, n_eff, batch_len, reason, ...); `ci95` is its [low, high] — at the spec's level, 95 %
unless `ci:` or `--sigma` says otherwise, the key kept for the readers of older summaries — or null when the
method is none (ci.reason says why).
"""
from __future__ import annotations

import math
import platform
from typing import Any

from ccrig.analysis import metric_table, settling, stats
from ccrig.tcp_modules import bpf_fault
from ccrig.errors import RunError
from ccrig.experiments.run import fidelity
from ccrig.experiments import spec as specmod
from ccrig.experiments.run.collectors import FlowSampler
from ccrig.experiments.workloads import Flow

# the metrics summary.json holds for each flow and for the system (analysis/metric_table.py)
FLOW_METRICS = metric_table.names("flow")
SYSTEM_METRICS = metric_table.names("system")
FLOW_KEYS = ("flow", "cc", "kernel_cc", "sender", "receiver", "label")


def stat_of(ci: stats.Ci) -> dict:
    """A metric's entry in summary.json from its confidence interval (see the module's docstring)."""
    return {"mean": ci.mean, "std": ci.std, "n": ci.n,
            "ci95": None if ci.method == "none" else [ci.low, ci.high], "ci": ci.to_dict()}


def over_repetitions(per_rep: list[dict], level: float) -> dict:
    """A point's metric from its repetitions' entries: t over their means with two or more (method runs), else
    the one repetition's own interval."""
    means = [r["mean"] for r in per_rep if r and r.get("mean") is not None]
    if len(per_rep) == 1 or len(means) < 2:
        return dict(per_rep[0]) if per_rep else stat_of(stats.over_runs([], level))
    return stat_of(stats.over_runs(means, level))


def goodput_problems(entry: dict, t_max: float) -> list[str]:
    """Goodput above T_max (the bottleneck's payload capacity) beyond its confidence interval is a
    measurement problem, not a fact: the system's and each flow's. Without an interval, a mean above T_max is
    flagged too (nothing says it is within the noise). Goodput is cumulatively acknowledged bytes, so a window
    counts what crossed before it and was acknowledged in it: study 000's 12-s Reno runs without SACK read up to
    1.035 of T_max a repetition, their first measured interval 1.068 on average (its README, "Run length")."""
    out = []
    for who, g in [("system", entry["system"].get("goodput_bps"))] + \
                  [(f"flow {f['flow']}", f.get("goodput_bps")) for f in entry.get("flows", [])]:
        if not g or g.get("mean") is None:
            continue
        low = g["ci95"][0] if g.get("ci95") else g["mean"]
        if low > t_max:
            out.append(f"{who}: goodput {g['mean'] / 1e6:.3f} Mbit/s is above T_max {t_max / 1e6:.3f} Mbit/s "
                       + ("beyond its confidence interval" if g.get("ci95") else "(no confidence interval)")
                       + ": not a result: the counters, the clocks or the link's rate, or the measured window's "
                         "ends (data that crossed the link before it and was acknowledged in it: a loss repaired "
                         "across the warm-up's end; a longer run shrinks it)")
    return out


# a repetition with more than this share of its measured intervals degraded (a sampler more than 1 s
# late, so the interval came from stale counters) is unreliable, and so is its point
UNRELIABLE_SHARE = 0.1


def min_rtt_floor(topology, wire_bytes: int, rate_bps: float) -> float:
    """The least RTT a data packet of a flow can see: the path's configured propagation RTT (the spec's
    `topology.rtt`, divided by a scaled topology's `scale`; 0 where no delay is added) plus one full-size
    packet's transmission time at the bottleneck rate (1.2 ms at 10 Mbit/s)."""
    # with per-pair RTTs (dumbbell, tandem) the least of them: a floor must hold for every flow
    rtts = [float(getattr(topology, "rtt", 0.0) or 0.0)]
    rtts += [float(e.rtt) for e in getattr(topology, "per_pair", None) or () if getattr(e, "rtt", None) is not None]
    rtt = min(rtts) / float(getattr(topology, "scale", 1.0) or 1.0)
    return rtt + 8.0 * wire_bytes / rate_bps if rate_bps > 0 else rtt


def data_min_rtt(trace, a: float, b: float) -> float | None:
    """A flow's least RTT measured from its data packets over the measured intervals [a, b]: the smallest smoothed
    RTT (tcpi_rtt) its sender held there, sampled every 20 ms; None without one.

    Why not TCP's own tcpi_min_rtt: the kernel's min_rtt filter (tcp_update_rtt_min, a windowed minimum over
    net.ipv4.tcp_min_rtt_wlen, 300 s) takes the handshake's sample too — tcp_ack() on the SYN-ACK times the SYN —
    and a SYN is a 74-byte frame through an idle shaper (htb lends its burst), a few microseconds on netns
    (0.003-0.010 ms here against a 1.211 ms floor at 10 Mbit/s), so the filter keeps it for the whole run. The
    smoothed RTT starts from that sample too, but each data ACK moves it an eighth of the way to its own sample,
    so after the warm-up's hundreds of ACKs the handshake's weight is (7/8)^k, nothing. TCP_INFO has no per-ACK
    sample; a smoothed one is never below the least data sample, so it holds to the floor from above (it is an
    upper bound of the data packets' least RTT, by the queueing the flow never left). tcpi_min_rtt stays in
    min_rtt_s, which the delay check reads (a handshake measures the propagation delay as well as data does)."""
    vals = [s["rtt_us"] for t, s in trace if a <= t <= b and 0 < s.get("rtt_us", 0) < 0xFFFFFFFF]
    return min(vals) / 1e6 if vals else None


def handshake_retransmitted(trace) -> bool:
    """Whether a flow's SYN (or the SYN-ACK answering it) was retransmitted: its sender's first established sample
    already counts a retransmission (no data segment can have timed out within one sampling period of the
    handshake). By Karn's rule TCP then takes no RTT sample from the handshake, so tcpi_min_rtt comes from data
    packets that met the other flows' queue (15-49 ms above a 500 ms path at PER 0.4, 30 flows): the delay check's
    upper bound does not hold for such a flow, its lower bound does."""
    first = next((s for _, s in trace if s.get("state") == TCP_ESTABLISHED), None)
    return bool(first and first.get("total_retrans", 0) > 0)


TCP_ESTABLISHED = 1   # include/net/tcp_states.h


# TCP times a retransmitted segment's ACK by its timestamps, which tick in milliseconds (TCP_TS_HZ): such samples,
# and a smoothed RTT made of them, can read up to one tick low (seen at PER 0.4 on netns: 1.000 ms against a 1.211 ms
# floor)
RTT_TICK_S = 1e-3
# a bottleneck this busy (the system's throughput over T_max) has no tokens to lend: each data packet waits its
# transmission time there. A less busy one lets packets through on its burst at the veth's speed, so the floor is
# then the propagation RTT alone (measurement.py picks which)
BUSY = 0.9


def min_rtt_problems(entry: dict, floor: float) -> list[str]:
    """Flows whose least RTT from data packets (data_min_rtt_s: their least smoothed RTT over the measured
    intervals) is below the path's floor by more than TCP's timestamp tick (RTT_TICK_S): no data packet comes back
    sooner than the propagation RTT (plus its transmission at a busy bottleneck), so a value below it is a path
    that was not what the spec asked (a shaper that did not shape, a delay that was not added), or a clock's or a
    counter's fault."""
    out = []
    for f in entry.get("flows", []):
        m = f.get("data_min_rtt_s")
        if m is not None and m < floor - RTT_TICK_S:
            out.append(f"flow {f['flow']}: its data packets' least RTT (smoothed) {m * 1e3:.3f} ms is below the "
                       f"path's floor {floor * 1e3:.3f} ms by more than TCP's {RTT_TICK_S * 1e3:g} ms timestamp "
                       f"tick: the path was faster than the spec's")
    return out


def degraded(system_rows: list[dict], warmup: int) -> dict | None:
    """The measured intervals a late sampler degraded, and whether they make the repetition unreliable."""
    measured = stats.measured(system_rows, warmup)
    bad = [i + warmup for i, r in enumerate(measured) if r.get("degraded")]
    if not bad:
        return None
    share = len(bad) / len(measured)
    return {"intervals": bad, "share": share, "unreliable": share > UNRELIABLE_SHARE}


def counts(rows: list[dict], warmup: int) -> dict:
    """A flow's segments sent and lost (retransmitted, less those its receiver reported as duplicates) summed over
    the intervals its metrics cover: its loss rate over the whole repetition is lost / sent (study 002's Eq. 5
    reads it: analysis/throughput.mathis_flow_bps)."""
    kept = [r for r in stats.measured(rows, warmup) if r.get("active", True) and not r.get("fault")]
    return {k: float(sum(r.get(k) or 0.0 for r in kept)) for k in ("segs_sent", "segs_lost")}


def means(flows: list[Flow], rows_by_flow: dict[int, list[dict]], system_rows: list[dict], warmup: int,
          level: float = stats.LEVEL) -> tuple[dict, list[dict]]:
    """The system's and each flow's metrics over the measured intervals."""
    def stat(rows, name):
        # a flow's metrics cover only the intervals it was active in (started, not yet stopped), and none a
        # kernel fault touched (`fault`: analysis/samples.fault_exclusion); the interval within one run is by
        # batch means (stats.within_run), saying its method
        return stat_of(stats.within_run([r.get(name) for r in stats.measured(rows, warmup)
                                         if r.get("active", True) and not r.get("fault")], level))
    system = {m: stat(system_rows, m) for m in SYSTEM_METRICS}
    per_flow = []
    for f in flows:
        entry = {"flow": f.index, "cc": f.label, "kernel_cc": f.cc, "sender": f.sender, "receiver": f.receiver,
                 **({"label": f.name} if f.name else {})}
        entry.update({m: stat(rows_by_flow[f.index], m) for m in FLOW_METRICS})
        if any("fair_share_bps" in r for r in rows_by_flow[f.index]):   # T_max of the active flows
            entry["fair_share_bps"] = stat(rows_by_flow[f.index], "fair_share_bps")
        entry["counts"] = counts(rows_by_flow[f.index], warmup)
        per_flow.append(entry)
    return system, per_flow


# how much of an interval a switch of the on/off sources may touch and the interval still count as on (or off)
# throughout: under one packet of a 50 packets/s source in a 1 s interval
PHASE_EDGE = 0.01


def interval_phases(periods: list[tuple[float, float]], t0: float, interval: float, n: int) -> list[str | None]:
    """Each of n intervals from t0: "on" when the sources were on throughout it and the interval before it
    (periods: when, on the same clock), "off" when off throughout both, None otherwise (neither). The interval
    before counts because a source's packets reach the receivers late by the queue and the path (measured on
    netns: 0.1 s of a 100-packet queue at 10 Mbit/s; Keshav's scenario 3 scaled: 0.4 s of queue, 0.2 s of path),
    so the interval right after a switch still holds the phase before it."""
    merged: list[list[float]] = []
    for a, b in sorted(periods):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out = []
    for k in range(n):
        a, b = t0 + (k - 1) * interval, t0 + (k + 1) * interval
        covered = sum(max(0.0, min(b, e) - max(a, s)) for s, e in merged)
        out.append("on" if covered >= (b - a) - PHASE_EDGE * interval else
                   "off" if covered <= PHASE_EDGE * interval else None)
    return out


def by_phase(flows: list[Flow], results: dict[int, Any], t0: float, interval: float, warmup: int,
             rows_by_flow: dict[int, list[dict]], system_rows: list[dict], level: float = stats.LEVEL) -> dict:
    """Where flows are on/off sources (Workload.on_periods): the metrics over the intervals they were on
    throughout and over those they were off throughout, as `phases` ({} without such a source). The paper that
    asked for it (Keshav's scenario 3) tabulates the background on and off apart; a whole run's mean mixes them."""
    own = [f.workload.on_periods(results[f.index]) for f in flows]
    if all(p is None for p in own):
        return {}
    phases = interval_phases([x for p in own if p for x in p], t0, interval, len(system_rows))
    out = {}
    for phase in ("on", "off"):
        def only(rows):
            return [r if i < len(phases) and phases[i] == phase else {**r, "active": False}
                    for i, r in enumerate(rows)]
        system, per_flow = means(flows, {i: only(rows) for i, rows in rows_by_flow.items()}, only(system_rows),
                                 warmup, level)
        out[phase] = {"intervals": [i for i, x in enumerate(phases) if x == phase and i >= warmup],
                      "system": system, "flows": per_flow}
    return {"phases": out}


def repetition(flows: list[Flow], rows_by_flow: dict[int, list[dict]], system_rows: list[dict], warmup: int,
               t_max: float, share: float, checks: list[dict], level: float = stats.LEVEL) -> dict:
    system, per_flow = means(flows, rows_by_flow, system_rows, warmup, level)
    out = {"system": system, "flows": per_flow, "t_max_bps": t_max, "fair_share_bps": share, "cross_check": checks}
    # every interval's system goodput from the start (a fault's intervals none): the point's settling test
    out["series"] = {"goodput_bps": [None if r.get("fault") else r.get("goodput_bps") for r in system_rows]}
    out["measurement_problems"] = goodput_problems(out, t_max)
    late = degraded(system_rows, warmup)
    if late is not None:
        out["degraded"] = late
        if late["unreliable"]:
            out["unreliable"] = (f"{len(late['intervals'])} of {len(stats.measured(system_rows, warmup))} measured "
                                 f"intervals degraded by a late sampler (more than {UNRELIABLE_SHARE:.0%})")
    return out


def steady_window(exp: specmod.Experiment) -> tuple[int, int | None, int] | None:
    """Where a point's goodput should not drift after its warm-up (analysis/settling.py's window), or None where it
    moves by design. Every flow bulk, started by the warm-up's end and running to the run's; then without link
    events the measured window in single intervals (warmup, None, 1), and with link events that all repeat on one
    period of whole intervals (study 001's handoffs) the whole periods after the warm-up, two at least, a period a
    block (start, end, period)."""
    settled_by = exp.warmup * exp.interval
    if not all(f.workload.kind == "bulk" and f.start <= settled_by and f.stop is None for f in exp.flows):
        return None
    if not exp.events:
        return exp.warmup, None, 1
    periods = {e.every for e in exp.events}
    if None in periods or len(periods) > 1 or any(e.until is not None for e in exp.events):
        return None
    block, phase = (x / exp.interval for x in (periods.pop(), min(e.at for e in exp.events)))
    if any(abs(x - round(x)) > 1e-9 for x in (block, phase)):   # a period across interval boundaries: not alike
        return None
    block, phase = round(block), round(phase)
    start = phase + max(0, math.ceil((exp.warmup - phase) / block)) * block
    whole = (exp.n_intervals - start) // block
    return (start, start + whole * block, block) if whole >= 2 else None


def point(p: specmod.Point, reps: list[dict], numbers: list[int] | None = None) -> dict:
    """A point's entry from its repetitions' (numbers: each one's repetition number, default 0, 1, ...)."""
    level = getattr(p.experiment, "ci", None) or stats.LEVEL
    system = {m: over_repetitions([r["system"].get(m) for r in reps], level) for m in SYSTEM_METRICS
              if all(m in r["system"] for r in reps)}
    flows = []
    for i, f in enumerate(reps[0]["flows"]):
        entry = {k: f[k] for k in FLOW_KEYS if k in f}
        entry.update({m: over_repetitions([r["flows"][i][m] for r in reps], level) for m in FLOW_METRICS})
        flows.append(entry)
    numbers = list(range(len(reps))) if numbers is None else numbers
    out = {"index": p.index, "params": p.params, "t_max_bps": reps[0]["t_max_bps"],
           "fair_share_bps": reps[0]["fair_share_bps"], "system": system, "flows": flows,
           "fidelity": fidelity.point_verdict(reps),   # ok / testbed-limited, with the reasons
           "repetitions": [{"rep": n, **r} for n, r in zip(numbers, reps)]}
    # goodput above T_max, and each repetition's own problems (min RTT below the physical floor)
    out["measurement_problems"] = goodput_problems(out, out["t_max_bps"]) + [
        f"repetition {n}: {x}" for n, r in zip(numbers, reps) for x in r.get("measurement_problems", [])]
    window = steady_window(p.experiment)
    if window is not None:   # whether the warm-up outlasted the transient (analysis/settling.py)
        out["settling"] = settling.drift([(r.get("series") or {}).get("goodput_bps") or [] for r in reps],
                                         p.experiment.warmup, window=window)
        late = settling.problem(out["settling"])
        if late is not None:
            out["measurement_problems"].append(late)
    if "min_rtt_floor_s" in reps[0]:
        out["min_rtt_floor_s"] = reps[0]["min_rtt_floor_s"]
    unreliable = [f"repetition {n}: {r['unreliable']}" for n, r in zip(numbers, reps) if r.get("unreliable")]
    if unreliable:   # a late sampler degraded too many of a repetition's intervals
        out["unreliable"] = unreliable
    return out


def cross_check(flows: list[Flow], sampler_of: dict[str, FlowSampler], results: dict[int, Any]) -> list[dict]:
    """Per flow: the sender's bytes_acked and the receiver's bytes_received against the workload program's own
    count of what the receiver got (Workload.received_bytes; the keys keep iperf3's name, which is summary.json's
    format), and the congestion control the socket really used."""
    out = []
    for f in flows:
        snd = sampler_of[f.sender_key].snapshot(f.sender_key)
        rcv = sampler_of[f.receiver_key].snapshot(f.receiver_key)
        acked = max((s.get("bytes_acked", 0) for _, s in snd), default=0)
        received = max((s.get("bytes_received", 0) for _, s in rcv), default=0)
        own = None if results[f.index] is None else f.workload.received_bytes(f, results[f.index])
        # the program sets the congestion control once the socket exists, so the first samples may show the
        # namespace's default; the one that carried the data is the last
        used = next((s["cc"] for _, s in reversed(snd) if s.get("cc")), None)
        if used is not None and used != f.cc:
            raise RunError(f"flow {f.index} asked for congestion control {f.cc!r} but its socket used {used!r}")
        # the most in flight from the workload's end on (its program's count ends there, the socket's a sampling
        # period after the collector's last view): the two counts may differ by up to that much, either way
        # (analysis/samples.collector_disagrees)
        tail = [(t, s) for t, s in snd if t >= f.start + f.duration - 1.0] or snd[-1:]
        flight = max((int(s.get("unacked", 0)) * int(s.get("snd_mss", 0)) for _, s in tail), default=0)
        out.append({"flow": f.index, "collector_bytes_acked": acked, "receiver_bytes_received": received,
                    "iperf3_bytes_received": own, "collector_in_flight_bytes": flight,
                    # when the collector last saw each socket (s since t0): a disagreement's first witness
                    "collector_last_s": [snd[-1][0] if snd else None, rcv[-1][0] if rcv else None],
                    "collector_vs_iperf3": acked / own - 1 if own else None,
                    "receiver_vs_iperf3": received / own - 1 if own else None})
    return out


def by_kind(flows: list[Flow], results: dict[int, Any]) -> dict:
    """What each workload kind among the flows adds to the repetition's entry (Workload.summary)."""
    out: dict = {}
    kinds: dict[type, list[Flow]] = {}
    for f in flows:
        kinds.setdefault(type(f.workload), []).append(f)
    for cls, mine in kinds.items():
        out.update(cls.summary(mine, {f.index: results[f.index] for f in mine}))
    return out


def trace_warnings(flows: list[Flow], sampler_of: dict[str, FlowSampler]) -> list[str]:
    """Kernel faults that make a flow's numbers unreliable. On some kernels (seen on 6.18) a BPF congestion
    control's ssthresh callback now and then leaves ssthresh at a garbage value (beyond any law's), and the
    kernel then grows cwnd to ~1e9: flag it rather than hide it (ccrig.tcp_modules.bpf_fault)."""
    out = []
    for f in flows:
        bad = [s for _, s in sampler_of[f.sender_key].snapshot(f.sender_key) if bpf_fault.hit(s)]
        if bad:
            out.append(f"flow {f.index} ({f.label}): ssthresh {bad[0].get('snd_ssthresh')}, cwnd "
                       f"{bad[0].get('snd_cwnd')} are beyond any law's; its cwnd and rates after that are not the "
                       f"law's (a kernel fault with BPF congestion control on {platform.release()})")
    return out


def add_repairs(summary: dict, counts: dict[str, int]) -> None:
    """summary.json's `bpf_repaired`: per law, the garbage thresholds its BPF variant put right (bpf_fault.py).
    Each session registers its variants afresh, so a resumed run's counts add to the earlier sessions'."""
    for cc, n in counts.items():
        total = summary.setdefault("bpf_repaired", {})
        total[cc] = total.get(cc, 0) + n


def kernel_faults(flows: list[Flow], sampler_of: dict[str, FlowSampler]) -> list[dict]:
    """Per flow that the kernel's BPF struct_ops fault hit, the samples a law check leaves out
    (ccrig.tcp_modules.bpf_fault.clean_runs) of all its samples, and the faults' spans in seconds."""
    out = []
    for f in flows:
        trace = sampler_of[f.sender_key].snapshot(f.sender_key)
        _, excluded = bpf_fault.clean_runs(trace)
        if excluded:
            out.append({"flow": f.index, "excluded_samples": excluded, "samples": len(trace),
                        "spans_s": [list(span) for span in bpf_fault.spans(trace)]})
    return out


def record_setup(env: dict, summary: dict, pair: tuple, setup: dict) -> bool:
    """What a repetition set up that a run records once per point (env.json) or once (PAUSE's settings in
    summary.json too); whether env gained anything."""
    key, new = str(pair[0]), {}
    for what in ("sender_tcp", "links"):
        if what in setup and key not in env.setdefault(what, {}) and len(pair) == 2:
            env[what][key] = new[what] = setup[what]
    for what in ("pause", "topology"):   # the run's first PAUSE settings (each repetition has its own)
        if what in setup and what not in env:
            env[what] = new[what] = setup[what]
    if "pause" in new:
        summary["pause"] = new["pause"]
    return bool(new)
