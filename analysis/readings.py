"""One repetition's reading of a claim's quantity (analysis/verdicts.py takes one per repetition): a metric's
mean, an aggregate over flows, Jain's index over a subset, a model's throughput at the repetition's own loss and
RTT, a workload's own measure, one phase of an on/off source. None where the repetition has no value, which leaves
it out of the claim with that reason."""
from __future__ import annotations

from typing import Any

from .throughput import gaimd_bps, mathis_flow_bps


def phase(rep: dict, phase: str) -> dict:
    """A repetition's system and flows over one phase of its on/off source; a KeyError (no value) without one."""
    got = rep["phases"][phase]
    return {"system": got["system"], "flows": got["flows"]}


def exceeds(value: float | None, threshold: float) -> float | None:
    return None if value is None else float(value > threshold)


def mean(entry: dict | None) -> float | None:
    return None if not entry else entry.get("mean")


def agg(xs: list[float | None], agg: str) -> float | None:
    if not xs or any(x is None for x in xs):
        return None
    return sum(xs) if agg == "sum" else sum(xs) / len(xs)


def div(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def jain(xs: list[float | None]) -> float | None:
    if not xs or any(x is None for x in xs) or not any(xs):
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def gaimd(flow: dict, law, loss: float | None) -> float | None:
    """Study 001's Eq. 1 for one flow of one repetition (analysis/throughput.gaimd_bps) at the repetition's loss
    per packet offered (the system's: every flow of a point crosses the same drop points) and the flow's own
    throughput and RTT. Not the flow's own `loss`: that is a mean of per-interval ratios, which the intervals a
    flow spent in a timeout (one retransmission of one segment sent: 1.0) inflate; 30 flows at PER 0.01 read
    0.031 that way against 0.0117 counted. None without its inputs or without a loss (Eq. 1 then says nothing),
    which leaves the repetition out with that reason."""
    thr, rtt = mean(flow.get("throughput_bps")), mean(flow.get("rtt_s"))
    if loss is None or thr is None or not rtt:
        return None
    return gaimd_bps(loss, thr, rtt, law.alpha, law.beta)


def mathis(flow: dict) -> float | None:
    """Study 002's Eq. 5 for one flow of one repetition (analysis/throughput.mathis_flow_bps): its own segments
    lost over sent, summed over the intervals its metrics cover (summary.json's `counts`), and its mean smoothed
    RTT. None without them (a summary written before flows had counts) or without a loss, which leaves the
    repetition out with that reason."""
    counts, rtt = flow.get("counts") or {}, mean(flow.get("rtt_s"))
    if not rtt or counts.get("segs_sent") is None or counts.get("segs_lost") is None:
        return None
    return mathis_flow_bps(counts["segs_lost"], counts["segs_sent"], rtt)


def workload(rep: dict, flow: int, metric: str) -> float | None:
    """KIND.KEY[.STAT] of one flow in one repetition's workload record."""
    kind, *path = metric.split(".")
    rec: Any = next((r for r in rep.get(kind) or [] if r.get("flow") == flow), None)
    for key in path:
        rec = rec.get(key) if isinstance(rec, dict) else None
    return float(rec) if isinstance(rec, (int, float)) else None


def loss_drawn(rep: dict) -> float | None:
    """How much more of its packets a repetition's random loss dropped over its measured window than its
    probability says (repetition.json `loss_drawn`, from drawn_between each interval): (dropped - p x offered) /
    offered over the drop points whose loss is Bernoulli at a fixed p. Its expectation is 0: every packet offered
    is dropped with probability p whatever came before, so over a window fixed in advance dropped - p x offered has
    mean 0 (the ratio's bias is of the order of 1/offered). None without one (no random loss, a Gilbert-Elliott
    model, a loss a link event changes, a repetition recorded before it was)."""
    return (rep.get("loss_drawn") or {}).get("value")


def drawn_between(before: dict, after: dict) -> tuple[float, float]:
    """(dropped - p x offered, offered) between two readings of the drop points' counts (LinkConditions.drops:
    name -> counts, with `p` where the loss is Bernoulli at a fixed p), over those drop points."""
    excess = offered = 0.0
    for name, c in after.items():
        if c.get("p") is None:
            continue
        b = before.get(name) or {}
        dropped = c.get("dropped", 0) - b.get("dropped", 0)
        n = dropped + c.get("passed", 0) - b.get("passed", 0)
        excess += dropped - c["p"] * n
        offered += n
    return excess, offered
