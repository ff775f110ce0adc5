"""A Topology as Mininet sees it: names, what each node and switch port is set to, and the Topo itself.

Every link of the Topology crosses one switch of its own,

    node A  eth_k ──veth── [switch w<i>] ──veth── eth_m  node B          (link i of the Topology)

so addresses (198.18.i.0/24), interface names (eth0, eth1, ...), static routes and every egress's tc are the
Topology's on both nodes, exactly as on the netns testbed. An egress gets
  * our qdisc classes (topologies/links.py egress_argv) where the Topology asks for a queue: a discipline or a
    buffer (the bottleneck; pause_chain's queues), so it behaves exactly as on netns;
  * else Mininet's TCLink (htb `bw`, netem `delay`/`loss` with a netem limit that never drops) for the rest:
    rates, added delay and random loss.

The Topo is plain data (no root, no network): the testbed builds it, and so does `mn --custom
topologies/mn_<name>.py` through mn_topo().
"""
from __future__ import annotations

import copy
import shlex
import zlib

# Debian's Mininet, imported absolutely: this package is ccrig.topologies.testbeds.mininet, so the bare name
# `mininet` is never ours (no implicit relative imports in Python 3)
from mininet.link import Intf, TCIntf, TCLink
from mininet.log import lg
from mininet.node import Node
from mininet.topo import Topo
from pydantic import ValidationError

from ccrig.errors import InputError, RunError
from ccrig.qdiscs import from_spec
from ccrig.qdiscs.base import wire_bytes
from ... import SPECS
from ...links import NETEM_LIMIT, egress_argv
from ...topology import Egress, Topology

IFNAMSIZ = 15


# --- names ---------------------------------------------------------------------------------------------------

class Names:
    """Mininet names for a Topology's nodes and switches: plain (s1, w0) for `mn --custom`, prefixed for a run.

    A run's nodes are `<prefix>-<node>` (their shells show `mininet:<prefix>-<node>`), its switches
    `cm<tag>w<i>` and their ports `cm<tag>w<i>-a|-b` (`<tag>`: 5 characters hashed from the prefix): interface
    names have 15 characters at most and live in the root namespace, so concurrent runs must not collide."""

    def __init__(self, prefix: str | None = None):
        self.prefix = prefix
        self.tag = "" if prefix is None else "cm" + _base36(zlib.crc32(prefix.encode()) % 36 ** 5, 5)

    def node(self, name: str) -> str:
        return name if self.prefix is None else f"{self.prefix}-{name}"

    def switch(self, link: int) -> str:
        return f"{self.tag}w{link}"

    def port(self, link: int, end: str) -> str:
        """The switch's port toward the link's end a or b."""
        name = f"{self.switch(link)}-{end}"
        if len(name) > IFNAMSIZ:
            raise RunError(f"mininet: interface name {name} is longer than {IFNAMSIZ} characters "
                           f"(too many links: {link + 1})")
        return name

    def group(self) -> int:
        """The run's network device group (`ip link ... group`), for its bridges and their ports: from the tag,
        never 0 (every other device's group)."""
        return zlib.crc32(self.tag.encode()) % 0x7FFFFFFF + 1 if self.prefix else 0

    def dpid(self, link: int) -> str:
        # unique per run and link; Mininet would otherwise derive it from the first number in the name
        tag = zlib.crc32(self.tag.encode()) if self.prefix else 0
        return f"{tag:08x}{link + 1:08x}"


def _base36(n: int, width: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    for _ in range(width):
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out


# --- what each node and switch port is set to ---------------------------------------------------------------

def wire_argv(dev: str, mtu: int) -> list[list[str]]:
    """An interface that hands its qdisc (and the next hop) wire-sized packets (docs/architecture.md's GSO trap) with
    their checksums filled in: a userspace datapath (OVS netdev) forwards through AF_PACKET the packets whose
    checksum a veth left to offload as they are, and the receiver drops them as corrupt (Mininet's TCULink
    says as much), so TCP would stall while ping works."""
    wire = str(wire_bytes(mtu))
    return [["ip", "link", "set", "dev", dev, "mtu", str(mtu), "gso_max_segs", "1", "gso_max_size", wire,
             "gro_max_size", wire],
            ["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off"]]


def queue_by_ccrig(egress: Egress, mtu: int) -> bool:
    """Our qdisc classes carry an egress that asks for a queue (a discipline or a buffer), or a rate beyond
    what TCLink takes; TCLink carries the rest."""
    if egress.qdisc is not None or egress.buffer is not None:
        return True
    return egress.rate is not None and egress.rate.bps(wire_bytes(mtu)) / 1e6 > TCIntf.bwParamMax


def tclink_params(egress: Egress, mtu: int) -> dict:
    """TCLink's parameters for an egress it carries ({} when the egress is the wire's)."""
    if queue_by_ccrig(egress, mtu):
        return {}
    p: dict = {}
    if egress.rate is not None:
        p["bw"] = egress.rate.bps(wire_bytes(mtu)) / 1e6  # Mbit/s
    if egress.delay > 0:
        p["delay"] = f"{egress.delay * 1e6:.0f}us"
    if egress.loss > 0:
        p["loss"] = egress.loss * 100  # percent
    if egress.needs_netem:
        p["max_queue_size"] = NETEM_LIMIT  # the delay line must never be the drop point
    return p


def node_setup_argv(topology: Topology, node: str) -> list[list[str]]:
    """Everything a node needs after Mininet made its interfaces and addresses: forwarding, wire-sized packets,
    static routes and our qdisc classes; run inside the node."""
    return [argv for group in node_setup(topology, node).values() for argv in group]


def node_setup(topology: Topology, node: str, routes: dict | None = None,
               interfaces: dict | None = None) -> dict[str, list[list[str]]]:
    """node_setup_argv by program, so the testbed can feed `ip` and `tc` lines to one `-batch` process each.
    `routes` (own_namespace_routes) and `interfaces` are the Topology's, when the caller has them (working out
    the routes takes milliseconds per node: a testbed setting up every node computes them once)."""
    ifs = (interfaces or topology.interfaces())[node]
    mine = (routes or topology.own_namespace_routes())[node]
    wire = [argv for x in ifs for argv in wire_argv(x.name, topology.mtu)]
    flows = max(1, len(topology.pairs))
    route = [["ip", "route", "add", subnet, "via", via] for subnet, via in mine]
    return {
        "sysctl": [["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]] if topology.node(node).role == "router" else [],
        "ip": [a for a in wire if a[0] == "ip"] + route,
        "ethtool": [a for a in wire if a[0] == "ethtool"],
        "tc": [argv for x in ifs if queue_by_ccrig(x.egress, topology.mtu)
               for argv in egress_argv(x.name, x.egress, topology.mtu, flows)],
    }


# --- the Topo ----------------------------------------------------------------------------------------------

class TopologyNode(Node):
    """A Topology node as a Mininet host. Standalone (`mn --custom`) it runs its setup itself; the testbed
    passes none and runs the same argv through Commands, so they land in commands.log."""

    def config(self, setup=(), **params):
        r = super().config(**params)
        for argv in setup:
            out = self.cmd(shlex.join(argv) + " 2>&1 || echo __ccrig_failed__")
            if "__ccrig_failed__" in out:
                lg.error(f"*** {self.name}: {shlex.join(argv)}: {out.replace('__ccrig_failed__', '').strip()}\n")
        return r


class TopologyTopo(Topo):
    """A Topology as a Mininet Topo: its nodes as hosts, every link through a switch of its own."""

    def build(self, topology: Topology, names: Names | None = None, setup: bool = True):
        names = names or Names()
        self.topology, self.names = topology, names
        for n in topology.nodes:
            self.addHost(names.node(n.name), cls=TopologyNode, ip=None,
                         setup=node_setup_argv(topology, n.name) if setup else ())
        ifs = topology.interfaces()
        for i, link in enumerate(topology.links):
            sw = self.addSwitch(names.switch(i), dpid=names.dpid(i))
            for end, me, peer in (("a", link.a, link.b), ("b", link.b, link.a)):
                x = next(x for x in ifs[me] if x.peer == peer)
                params = tclink_params(x.egress, topology.mtu)
                # the switch's end of a TCLink is a plain port: no tc, no ethtool of its own
                opts = {"cls": TCLink, "cls2": Intf} if params else {}
                # up=None: no `ifconfig up` per interface through the node shells (Mininet's setIP brings the
                # node's end up; the testbed brings the ports up in its batches, standalone Mininet does here)
                self.addLink(names.node(me), sw, port1=int(x.name.removeprefix("eth")), port2=1 if end == "a" else 2,
                             intfName1=x.name, intfName2=names.port(i, end),
                             params1={"ip": f"{x.address}/{x.prefix}", "up": None, **params},
                             params2={} if setup else {"up": None}, **opts)


# --- `mn --custom` ----------------------------------------------------------------------------------------

def mn_topo(name: str, defaults: dict):
    """A `topos` entry for `mn --custom`: `--topo NAME[,PAIRS][,path=value...]` builds the named topology from
    `defaults` (a spec's `topology:` section) with dotted paths overridden, e.g.
    `--topo dumbbell,4,bottleneck.rate=20mbit,rtt=10ms`. The section is validated by the named topology's own
    model (topologies.SPECS, found by its `name`); a discipline may be named alone (`qdisc: pfifo`), as in a
    spec."""
    model = next((s for s in SPECS if s.model_fields["name"].default == name), None)
    if model is None:
        raise InputError(f"--topo {name}: not a named topology; expected one of "
                         f"{', '.join(s.model_fields['name'].default for s in SPECS)}")

    def make(pairs: int = 2, **overrides) -> TopologyTopo:
        source = f"--topo {name}"
        topo = {**copy.deepcopy(defaults), "name": name, "pairs": int(pairs)}
        for path, value in overrides.items():
            _set(topo, path, value, source)
        for key, part in topo.items():
            # the qdiscs' own short form (`qdisc: pfifo` is {kind: pfifo}), as a spec's topology has it
            if isinstance(part, dict) and isinstance(part.get("qdisc"), str):
                part["qdisc"] = from_spec(part["qdisc"], f"{source}: {key}.qdisc")
        try:
            built = model.model_validate(topo)
        except ValidationError as e:
            raise InputError(f"{source}: " + "; ".join(_error_line(err) for err in e.errors())) from None
        except InputError as e:  # a cross-field check of the model
            raise InputError(f"{source}: {e}") from None
        return TopologyTopo(built.build(int(pairs)))
    return make


def _set(section: dict, path: str, value, source: str) -> None:
    """Sets a dotted path (bottleneck.rate) in a topology section, making mappings as needed."""
    *parents, last = path.split(".")
    cur = section
    for part in parents:
        cur = cur.setdefault(part, {})
        if not isinstance(cur, dict):
            raise InputError(f"{source}: {path}: {part!r} is not a mapping")
    cur[last] = value


def _error_line(err: dict) -> str:
    """One pydantic error as the spec's errors read: where, what was given, what is accepted."""
    where = ".".join(map(str, err["loc"]))
    return f"{where}: got {err.get('input')!r}; {err['msg'].removeprefix('Value error, ')}"
