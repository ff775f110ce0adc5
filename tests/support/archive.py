"""Reading a repetition's archive in tests: what a sender put on the wire over the span a qdisc's counters cover."""
from __future__ import annotations


def sent_between(trace: list[dict], flow: str, t0: float, t1: float) -> int:
    """A flow's bytes_sent (TCP_INFO, trace.csv) from its last sample at or before t0 to its last at or before t1:
    what it sent while a qdisc sampled at t0 and t1 counted (a flow may start before the first sample, or run on
    past the last while its sender drains)."""
    rows = [(float(r["t"]), int(r["bytes_sent"])) for r in trace if r["flow"] == flow]
    def at(t):
        return max((b for s, b in rows if s <= t), default=0)
    return at(t1) - at(t0)
