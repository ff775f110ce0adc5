"""The flood workload (Keshav 003's malicious source): UDP packets of `size` as fast as the sender can, obeying
nothing (udp.py, sources.py). The sender's own interface limits it: a full queue there blocks its writes (the
socket's send buffer), so it reaches its access link's rate and no more. summary.json's `flood` has, per flow,
the sender's and the receiver's counts, delivered rate (payload and wire) and loss.

Give the sender's access link a rate (topology.access.rate on the dumbbell): measured here over an unshaped veth
pair, the sender put out 40700 packets/s of 1472 bytes and the receiver (Python, on a loaded 2-core machine)
took 28800/s, so 29 % were lost at the receiver's own socket: that measures our receiver, not the network.
Behind a 20 Mbit/s access link the flood delivers 20.00 Mbit/s on the wire, every packet sent received.

    flows: [{workload: {kind: flood, size: 1472b}}]
"""
from __future__ import annotations

from typing import Literal

from ccrig.experiments.workloads.udp import Datagrams


class Flood(Datagrams):
    """UDP as fast as the sender can."""
    kind: Literal["flood"] = "flood"

    pattern = "flood"
