"""The netns testbed: every node is a network namespace, every link a veth pair, routing is static IPv4.

Names: namespace `<prefix>-<node>` (prefix such as `ccrig-4242`), interfaces eth0, eth1, ... inside each
namespace, so nothing ccrig makes lives in the root namespace and `ccrig clean` finds it all by prefix.

Every interface sends wire-sized packets: without gso_max_segs 1 / gso_max_size 1514 and tso/gso/gro off, TCP
hands the qdisc ~64 KB super-packets and a "15-packet" pfifo holds hundreds of wire packets (DESIGN.md).
"""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from experiments.commands import Commands
from .links import egress_argv
from .testbed import Testbed

NETNS_DIR = Path("/run/netns")


class NetnsTestbed(Testbed):
    name = "netns"

    def ns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def up(self) -> None:
        topo, c = self.topology, self.commands
        ifs = topo.interfaces()
        for node in topo.nodes:
            ns = self.ns(node.name)
            c.run(["ip", "netns", "add", ns])
            c.run(["ip", "-n", ns, "link", "set", "lo", "up"])
            if node.role == "router":
                c.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"], ns=ns)
        for i, link in enumerate(topo.links):
            a = next(x for x in ifs[link.a] if x.peer == link.b)
            b = next(x for x in ifs[link.b] if x.peer == link.a)
            c.run(["ip", "-n", self.ns(link.a), "link", "add", a.name, "mtu", str(topo.mtu), "type", "veth",
                   "peer", "name", b.name, "netns", self.ns(link.b), "mtu", str(topo.mtu)])
        wire = topo.mtu + 14
        for node, lst in ifs.items():
            ns = self.ns(node)
            for x in lst:
                c.run(["ip", "-n", ns, "link", "set", x.name, "gso_max_segs", "1", "gso_max_size", str(wire),
                       "gro_max_size", str(wire)])
                c.run(["ethtool", "-K", x.name, "tso", "off", "gso", "off", "gro", "off"], ns=ns)
                c.run(["ip", "-n", ns, "addr", "add", f"{x.address}/{x.prefix}", "dev", x.name])
                c.run(["ip", "-n", ns, "link", "set", x.name, "up"])
        for node, routes in topo.routes().items():
            for subnet, via in routes:
                c.run(["ip", "-n", self.ns(node), "route", "add", subnet, "via", via])
        flows = max(1, len(topo.pairs))
        for node, lst in ifs.items():
            for x in lst:
                for argv in egress_argv(x.name, x.egress, topo.mtu, flows):
                    c.run(argv, ns=self.ns(node))

    def down(self) -> None:
        for node in self.topology.nodes:
            remove_namespace(self.ns(node.name), self.commands)

    def run(self, node, argv, check=True, timeout=60):
        return self.commands.run(argv, ns=self.ns(node), check=check, timeout=timeout)

    def popen(self, node, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        return self.commands.popen(argv, ns=self.ns(node), stdout=stdout, stderr=stderr)


def namespaces(prefix: str = "ccrig-") -> list[str]:
    """ccrig's namespaces: those whose names start with prefix."""
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def remove_namespace(ns: str, commands: Commands) -> None:
    """Kills every process in ns, then deletes it (its veths and qdiscs go with it). Never raises."""
    if not (NETNS_DIR / ns).exists():
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _pids(ns, commands)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if pids and sig == signal.SIGTERM:
            _wait_gone(pids, 2.0)
    commands.ok(["ip", "netns", "delete", ns])


def _pids(ns: str, commands: Commands) -> list[int]:
    try:
        out = commands.run(["ip", "netns", "pids", ns], check=False, timeout=10).stdout
    except Exception:
        return []
    return [int(p) for p in out.split() if p.isdigit()]


def _wait_gone(pids: list[int], timeout: float) -> None:
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return
        time.sleep(0.05)
