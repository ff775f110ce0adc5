"""The bottleneck's shaper: htb sets the rate, the discipline under it decides who goes and who is dropped.

    tc qdisc add dev D root handle 1: htb default 1
    tc class add dev D parent 1: classid 1:1 htb rate R ceil R quantum Q
    tc qdisc add dev D parent 1:1 handle 10: <discipline>

htb's quantum is set to one wire packet so low rates do not warn and scheduling stays packet-fair.
"""
from __future__ import annotations

from typing import Sequence

from ccrig.units import Size
from .base import Qdisc, wire_bytes

ROOT = "1:"
CLASS = "1:1"
LEAF = "10:"


def shaped_argv(dev: str, rate_bps: float, leaf: Qdisc, buffer: Size | None, mtu: int,
                flows: int = 1, flow_sources: Sequence[str] | None = None) -> list[list[str]]:
    wire = wire_bytes(mtu)
    rate = f"{round(rate_bps)}bit"
    return [
        ["tc", "qdisc", "add", "dev", dev, "root", "handle", ROOT, "htb", "default", "1"],
        ["tc", "class", "add", "dev", dev, "parent", ROOT, "classid", CLASS, "htb",
         "rate", rate, "ceil", rate, "quantum", str(wire)],
        *leaf.setup_argv(dev, CLASS, LEAF, buffer, rate_bps, mtu, flows, flow_sources=flow_sources),
    ]
