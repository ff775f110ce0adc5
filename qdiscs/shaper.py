"""The bottleneck's shaper: htb sets the rate, the discipline under it decides who goes and who is dropped.

    tc qdisc add dev D root handle 1: htb default 1
    tc class add dev D parent 1: classid 1:1 htb rate R ceil R quantum Q
    tc qdisc add dev D parent 1:1 handle 10: <discipline>

htb's quantum is set to one wire packet so low rates do not warn and scheduling stays packet-fair.

With `gso` (topology.gso: senders hand the network super-packets of up to 64 KB, so a hop costs one skb per
super-packet instead of one per frame) the shaper is tbf instead, with a peak-rate bucket of one wire packet:
tbf cuts every packet longer than that bucket (every super-packet) into wire packets as it enters
(sch_tbf.c: tbf_segment), so the discipline under it still queues, counts and drops wire packets:

    tc qdisc add dev D root handle 1: tbf rate R burst B peakrate P mtu M limit L
    tc qdisc add dev D parent 1:1 handle 10: <discipline>

B is 1 ms of the rate (at least M): a bucket of one frame would need a timer per frame, which caps one flow
near 0.5 of 1 Gbit/s here; htb too lets a class run ahead of its rate. P is 1 Tbit/s: the peak bucket is
there to mark the longest packet tbf takes whole (M), not to pace; a peak rate a veth reaches (10 x 1 Gbit/s)
would hold frames back by a timer and cap one flow near 0.7 of 1 Gbit/s again.
"""
from __future__ import annotations

from typing import Sequence

from ccrig.units import Size
from .base import Qdisc, wire_bytes

ROOT = "1:"
CLASS = "1:1"
LEAF = "10:"
# htb's class statistics (qdiscs/stats.py columns) that go up and down: its buckets' tokens
SHAPER_GAUGES = frozenset({"htb_tokens", "htb_ctokens"})


GSO_BURST_S = 0.001   # tbf's bucket under gso, in time at the rate
GSO_PEAK_BPS = 10**12  # its peak rate: above any rate ccrig shapes (units.RATE_RANGE) and any veth's


def gso_mtu(mtu: int) -> int:
    """tbf's peak-rate bucket under gso, the most it takes whole: one wire packet. A super-packet of two segments
    may be a single byte longer (its second segment as short as that: seen on Linux 6.1), so anything longer
    than a frame is cut."""
    return wire_bytes(mtu)


def shaper_argv(dev: str, rate_bps: float, mtu: int, gso: bool = False) -> list[list[str]]:
    """The root that sets the rate, with CLASS (1:1) as the place for the discipline."""
    rate = f"{round(rate_bps)}bit"
    if gso:   # limit: the default inner bfifo's bytes, replaced by the discipline at once
        burst = max(gso_mtu(mtu), round(rate_bps / 8 * GSO_BURST_S))
        return [["tc", "qdisc", "add", "dev", dev, "root", "handle", ROOT, "tbf", "rate", rate, "burst", str(burst),
                 "peakrate", f"{GSO_PEAK_BPS}bit", "mtu", str(gso_mtu(mtu)),
                 "limit", str(wire_bytes(mtu))]]
    return [
        ["tc", "qdisc", "add", "dev", dev, "root", "handle", ROOT, "htb", "default", "1"],
        ["tc", "class", "add", "dev", dev, "parent", ROOT, "classid", CLASS, "htb",
         "rate", rate, "ceil", rate, "quantum", str(wire_bytes(mtu))],
    ]


def shaped_argv(dev: str, rate_bps: float, leaf: Qdisc, buffer: Size | None, mtu: int,
                flows: int = 1, flow_sources: Sequence[str] | None = None, gso: bool = False) -> list[list[str]]:
    return [*shaper_argv(dev, rate_bps, mtu, gso),
            *leaf.setup_argv(dev, CLASS, LEAF, buffer, rate_bps, mtu, flows, flow_sources=flow_sources)]
