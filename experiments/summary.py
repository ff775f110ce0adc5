"""What summary.json says of a repetition and of a point, assembled from the interval rows and the samplers.

A repetition: per metric the mean of its measured interval means, their spread and 95 % CI (analysis.stats), for
the system and each flow; the cross-check of the kernel's byte counts against the workload program's own; the
faults seen in the trace; what each workload kind adds (files: `transfers`). A point: the same metrics over its
repetitions, and the repetitions themselves.
"""
from __future__ import annotations

import platform
from typing import Any

from ccrig.analysis import stats
from ccrig.errors import RunError
from . import spec as specmod
from .collectors import FlowSampler
from .workloads import Flow

METRICS = ["goodput_bps", "throughput_bps", "eee", "uar", "loss", "retrans_rate", "rtt_s", "min_rtt_s"]
FLOW_KEYS = ("flow", "cc", "kernel_cc", "sender", "receiver")


def repetition(flows: list[Flow], rows_by_flow: dict[int, list[dict]], system_rows: list[dict], warmup: int,
               t_max: float, share: float, checks: list[dict]) -> dict:
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


def point(p: specmod.Point, reps: list[dict]) -> dict:
    system = {m: stats.over_repetitions([r["system"][m] for r in reps]) for m in METRICS + ["jain"]}
    flows = []
    for i, f in enumerate(reps[0]["flows"]):
        entry = {k: f[k] for k in FLOW_KEYS}
        entry.update({m: stats.over_repetitions([r["flows"][i][m] for r in reps]) for m in METRICS})
        flows.append(entry)
    return {"index": p.index, "params": p.params, "t_max_bps": reps[0]["t_max_bps"],
            "fair_share_bps": reps[0]["fair_share_bps"], "system": system, "flows": flows,
            "repetitions": [{"rep": i, **r} for i, r in enumerate(reps)]}


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
        own = f.workload.received_bytes(f, results[f.index])
        # the program sets the congestion control once the socket exists, so the first samples may show the
        # namespace's default; the one that carried the data is the last
        used = next((s["cc"] for _, s in reversed(snd) if s.get("cc")), None)
        if used is not None and used != f.cc:
            raise RunError(f"flow {f.index} asked for congestion control {f.cc!r} but its socket used {used!r}")
        out.append({"flow": f.index, "collector_bytes_acked": acked, "receiver_bytes_received": received,
                    "iperf3_bytes_received": own,
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
    control's ssthresh callback now and then leaves ssthresh at a garbage value above TCP_INFINITE_SSTHRESH, and
    the kernel then grows cwnd to ~1e9: flag it rather than hide it."""
    out = []
    for f in flows:
        bad = [s.get("snd_ssthresh", 0) for _, s in sampler_of[f.sender_key].snapshot(f.sender_key)
               if s.get("snd_ssthresh", 0) > 0x7FFFFFFF]
        if bad:
            out.append(f"flow {f.index} ({f.label}): ssthresh {bad[0]} is beyond the kernel's infinity; "
                       f"its cwnd and rates after that are not the law's (a kernel fault with BPF congestion "
                       f"control on {platform.release()})")
    return out
