"""A link direction's tc: the argv that makes an interface transmit as its Egress says.

    rate + discipline:   htb root at the rate, the discipline (buffer) under it       (qdiscs/shaper.py)
                         (tbf instead of htb under topology.gso: it cuts super-packets into wire packets)
    delay / loss:        netem; under the shaper when the egress is also shaped, as Mininet's TCLink does
                         (on a kernel without netem, loss is a BPF program on the egress instead:
                         topologies/loss/ takes it off the Egress before the testbed builds the link)
    nothing set:         the interface's default qdisc, untouched
"""
from __future__ import annotations

from ccrig.qdiscs.fifo import Pfifo
from ccrig.qdiscs.shaper import CLASS, LEAF, shaped_argv, shaper_argv
from ccrig.units import wire_bytes
from .topology import Egress

NETEM_LIMIT = 100000  # packets: the delay line must never be the drop point


def netem_args(egress: Egress) -> list[str]:
    args = ["netem", "limit", str(NETEM_LIMIT)]
    if egress.delay > 0:
        args += ["delay", f"{egress.delay * 1e6:.0f}us"]
    if egress.loss > 0:
        args += ["loss", "random", f"{egress.loss * 100:.6g}%"]
    return args


def egress_argv(dev: str, egress: Egress, mtu: int, flows: int = 1,
                flow_sources: list[str] | None = None, gso: bool = False) -> list[list[str]]:
    """flows / flow_sources: how many flows cross the link and their source addresses, for disciplines
    that give every flow its own queue (drr); gso: the topology's senders hand super-packets (qdiscs/shaper.py)."""
    if egress.rate is None and egress.qdisc is None and not egress.needs_netem:
        return []
    if egress.rate is None:
        if egress.qdisc is not None:
            raise ValueError("a queue discipline needs a rate on its link (the shaper is where the queue forms)")
        return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", LEAF, *netem_args(egress)]]
    bps = egress.rate.bps(wire_bytes(mtu))
    if egress.needs_netem:
        if egress.qdisc is not None and not isinstance(egress.qdisc, Pfifo):
            raise ValueError("delay or loss on a shaped link with a discipline other than pfifo: put the "
                             "delay on another hop (topologies do this for you)")
        return shaper_argv(dev, bps, mtu, gso) + [["tc", "qdisc", "add", "dev", dev, "parent", CLASS, "handle", LEAF,
                                                   *netem_args(egress)]]
    return shaped_argv(dev, bps, egress.qdisc or Pfifo(), egress.buffer, mtu, flows, flow_sources, gso)


def uses_netem(egresses) -> bool:
    return any(e.needs_netem for e in egresses)
