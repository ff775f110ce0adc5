"""What a sources receiver logged (sources.py): every packet's sequence number, send and receipt time, and what
it says about a flow: delivered rate, loss, one-way delay, jitter, interarrival times, on and off periods.

Times are the two ends' own wall clocks. On netns, vm and mininet the sender and receiver share this machine's
clock, so a one-way delay is exact to the kernel's timestamps. On the hosts testbed each host has its own: a
delay here is off by the receiver's clock offset minus the sender's (env.json, topology.nodes.*.clock: each
measured to within half an SSH round trip, uncertainty_s), which can be larger than the delay itself on a LAN;
jitter, interarrival times, rates and on/off periods come from one clock each and are not affected.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ccrig.errors import RunError


@dataclass
class Packet:
    seq: int
    t_send: float
    t_recv: float
    size: int

    @property
    def delay(self) -> float:
        return self.t_recv - self.t_send


@dataclass
class ReceiverLog:
    """A receiver's output: its packets in arrival order and its last counters."""
    packets: list[Packet] = field(default_factory=list)
    counters: dict = field(default_factory=dict)


def read_log(path: Path, key: str) -> ReceiverLog:
    """The complete lines of a receiver's output (the last may still be being written)."""
    out = ReceiverLog()
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RunError(f"the receiver wrote no {path.name}") from None
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise RunError(f"the receiver's {path.name} says: {line.strip()[:200]}") from None
        out.counters = rec["s"].get(key, out.counters)
        out.packets += [Packet(*p) for p in rec.get("p", [])]
    return out


def read_sender(path: Path, what: str) -> dict:
    """The sender's closing line (sources.py); a sender that failed raises with its own words."""
    text = path.read_text().strip()
    try:
        return json.loads(text.splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise RunError(f"{what} failed: {text[:200] or 'no output'}") from None


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between ranks; None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def distribution(values: list[float]) -> dict:
    """mean, p50, p99, min, max of values (seconds)."""
    return {"mean": statistics.fmean(values) if values else None, "p50": percentile(values, 50),
            "p99": percentile(values, 99), "min": min(values, default=None), "max": max(values, default=None)}


def interarrivals(packets: list[Packet]) -> list[float]:
    """The gaps between consecutive receipts (the receiver's kernel timestamps)."""
    t = sorted(p.t_recv for p in packets)
    return [b - a for a, b in zip(t, t[1:])]


def jitter(packets: list[Packet]) -> float | None:
    """Mean absolute difference of consecutive packets' one-way delays (RFC 3393's IPDV, in seconds): what a
    clock offset cancels out of."""
    d = [p.delay for p in sorted(packets, key=lambda p: p.seq)]
    diffs = [abs(b - a) for a, b in zip(d, d[1:])]
    return statistics.fmean(diffs) if diffs else None


def bursts(packets: list[Packet], gap: float) -> list[tuple[float, float]]:
    """The receiver's on periods: runs of packets no more than `gap` seconds apart, as (first, last) receipt."""
    t = sorted(p.t_recv for p in packets)
    if not t:
        return []
    out, start = [], t[0]
    for a, b in zip(t, t[1:]):
        if b - a > gap:
            out.append((start, a))
            start = b
    out.append((start, t[-1]))
    return out
