"""The netns testbed: every node is a network namespace, every link a veth pair, routing is static IPv4.

Names: namespace `<prefix>-<node>` (prefix such as `ccrig-4242`), interfaces eth0, eth1, ... inside each
namespace, so nothing ccrig makes lives in the root namespace and `ccrig clean` finds it all by prefix.

Every interface sends wire-sized packets: without gso_max_segs 1 / gso_max_size 1514 and tso/gso/gro off, TCP
hands the qdisc ~64 KB super-packets and a "15-packet" pfifo holds hundreds of wire packets (docs/architecture.md). A
topology with `gso: true` keeps the super-packets (one skb per 64 KB on the hops before a shaper; a skb per frame
caps one flow near 500-700 Mbit/s here: `make bench BENCH=ceiling`) and its shaped links cut them
(qdiscs/shaper.py); GRO stays off, so nothing merges them again.

Setup is batched: one shell runs `ip -batch` and `tc -batch` per namespace (Commands.script), so a 30-sender
dumbbell comes up in about a second; commands.log holds the script as a here-document.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from ccrig import fanout
from ccrig.commands import NETNS_TAG, Commands, batch_text, in_netns
from ccrig.procs import stop_pids
from ..delayline.netns import LineProcesses, link_lines, setup_steps, stats_dir
from ..links import egress_argv
from ..testbed import Testbed

NETNS_DIR = Path("/run/netns")


# how many set-up scripts run at once: enough to keep a 2-4 core machine busy
SCRIPTS = 4


class NetnsTestbed(Testbed):
    kind = "netns"
    down_removes_nodes = True
    side_by_side = True
    signals_reach_popen = True
    gso = True
    delay_lines = True

    @classmethod
    def clean(cls, commands: Commands, prefix: str, keep) -> list[str]:
        said, named = [], namespaces(prefix)
        # processes started into a namespace of the prefix that has no name left (they entered while it was being
        # removed), found by their tag; removed with the named ones, in one removal
        unnamed = {ns: pids for ns, pids in tagged(prefix).items() if ns not in named and not keep(ns)}
        said += [f"kept namespace {ns}: its run is still going" for ns in named if keep(ns)]
        gone = [ns for ns in named if not keep(ns)]
        remove_namespaces(gone + list(unnamed), commands)
        for ns in gone:
            shutil.rmtree(stats_dir(ns), ignore_errors=True)   # a delay line's counters, if ns was one
            said.append(f"removed namespace {ns} and its processes")
        said += [f"stopped {len(pids)} process(es) started into namespace {ns}, which has no name left: "
                 + ", ".join(map(str, pids)) for ns, pids in unnamed.items()]
        return said

    def where(self, node: str) -> str:
        return f"namespace {self.ns(node)}"

    def ns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def netns_path(self, node: str) -> str:
        return str(NETNS_DIR / self.ns(node))

    def line_ns(self, line) -> str:
        return f"{self.prefix}-{line.name}"

    def up(self) -> None:
        topo, c = self.topology, self.commands
        ifs = topo.interfaces()
        wire = str(topo.wire)
        root: list[list[str]] = [["netns", "add", self.ns(n.name)] for n in topo.nodes]
        root += [["netns", "add", self.line_ns(line)] for line in self.lines]
        wire_sized = ["gso_max_segs", "1", "gso_max_size", wire]
        sized = [] if topo.gso else wire_sized
        offloads = ["gro", "off"] if topo.gso else ["tso", "off", "gso", "off", "gro", "off"]
        lines = {line.index: line for line in self.lines}
        for i, link in enumerate(topo.links):
            a = topo.egress_of(link.a, link.b)
            b = topo.egress_of(link.b, link.a)
            if i in lines:   # a - [line] - b (topologies/delayline/netns.py)
                root += link_lines(lines[i], self.ns(link.a), a.name, self.ns(link.b), b.name,
                                   self.line_ns(lines[i]), topo.mtu, sized, wire_sized)
                continue
            # both ends are created inside their namespaces, wire-sized from the start (but under gso)
            root.append(["link", "add", a.name, "netns", self.ns(link.a), "mtu", str(topo.mtu), *sized,
                         "type", "veth", "peer", "name", b.name, "netns", self.ns(link.b), "mtu", str(topo.mtu),
                         *sized])
        c.batch(["ip", "-batch", "-"], root)
        routes = topo.own_namespace_routes()
        flows = max(1, len(topo.pairs))
        sources = [topo.address(s) for s, _ in topo.pairs] or None
        # the nodes' steps dealt to SCRIPTS scripts, which run side by side (ccrig.fanout): every step is a process
        # start, which costs half a second in an emulated guest (18 namespaces took 35 s in one script)
        scripts: list[list[tuple[list[str], str | None]]] = []
        for node in topo.nodes:
            scripts.append(steps := [])
            ns = self.ns(node.name)
            enter = ["nsenter", f"--net={NETNS_DIR / ns}"]
            # IPv4 only, set before any link is up: IPv6's router solicitations and MLD reports would otherwise
            # cross the measured links and the queues' counters (a fresh bottleneck would not start at 0)
            sysctls = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
            if node.role == "router":
                sysctls.append("net.ipv4.ip_forward=1")
            steps.append(([*enter, "sysctl", "-q", "-w", *sysctls], None))
            lines = [["link", "set", "lo", "up"]]
            for x in ifs[node.name]:
                lines += [["addr", "add", f"{x.address}/{x.prefix}", "dev", x.name],
                          ["link", "set", x.name, "up"]]
            lines += [["route", "add", subnet, "via", via] for subnet, via in routes[node.name]]
            steps.append((in_netns(ns, ["ip", "-batch", "-"]), batch_text(lines)))
            for x in ifs[node.name]:
                # offloads are ethtool's alone; GRO at a router's ingress would re-merge packets
                steps.append(([*enter, "ethtool", "-K", x.name, *offloads], None))
            tc = [argv[1:] for x in ifs[node.name]
                  for argv in egress_argv(x.name, x.egress, topo.mtu, flows, sources, topo.gso)]
            if tc:
                steps.append((in_netns(ns, ["tc", "-batch", "-"]), batch_text(tc)))
        for line in self.lines:
            enter = ["nsenter", f"--net={NETNS_DIR / self.line_ns(line)}"]
            scripts.append(setup_steps(line, self.line_ns(line), enter))
        fanout.each(c.script, [d for d in (sum(scripts[i::SCRIPTS], []) for i in range(SCRIPTS)) if d])
        if self.lines:
            self._line_procs = LineProcesses(c, self.lines, self.line_ns, topo)
            self._line_procs.start()

    def stop_lines(self) -> dict[str, dict]:
        procs, self._line_procs = getattr(self, "_line_procs", None), None
        return procs.stop() if procs is not None else {}

    def down(self) -> None:
        self.stop_lines()
        remove_namespaces([self.ns(n.name) for n in self.topology.nodes] +
                          [self.line_ns(line) for line in self.lines], self.commands)

    def run(self, node, argv, check=True, timeout=60, input=None):
        return self.commands.run(argv, ns=self.ns(node), check=check, timeout=timeout, input=input)

    def popen(self, node, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL):
        return self.commands.popen(argv, ns=self.ns(node), stdout=stdout, stderr=stderr, stdin=stdin)


TESTBED = NetnsTestbed


def namespaces(prefix: str = "ccrig-") -> list[str]:
    """ccrig's namespaces: those whose names start with prefix."""
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def pids_in(names: list[str]) -> dict[str, list[int]]:
    """The processes living in each named namespace, found by comparing /proc/PID/ns/net with the namespace's
    inode (one pass over /proc instead of an `ip netns pids` per namespace)."""
    return _pids_by_inode(_inodes(names), names)


def _inodes(names: list[str]) -> dict[int, str]:
    """Each named namespace's inode (it stays the namespace's while a process holds it, named or not)."""
    inodes = {}
    for n in names:
        try:
            inodes[os.stat(NETNS_DIR / n).st_ino] = n
        except FileNotFoundError:
            pass
    return inodes


def _pids_by_inode(inodes: dict[int, str], names, tagged: bool = False) -> dict[str, list[int]]:
    """Each namespace's processes by the inode of their network namespace; with tagged, also those whose
    environment names it (ccrig.commands.NETNS_TAG), wherever they are: one whose namespace lost its name."""
    def which(pid: str) -> str | None:
        try:
            name = inodes.get(os.stat(f"/proc/{pid}/ns/net").st_ino)
        except OSError:
            return None
        return name if name is not None or not tagged else _tag(pid)
    return {n: [] for n in names} | {n: pids for n, pids in _walk(which).items() if n in names}


def _walk(which: Callable[[str], str | None]) -> dict[str, list[int]]:
    """Every process of this machine by the namespace which(pid) names (None: none)."""
    out: dict[str, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if (name := which(pid)) is not None:
            out.setdefault(name, []).append(int(pid))
    return out


def _tag(pid: str) -> str | None:
    """The namespace a process was started into by ccrig (its environment's NETNS_TAG), or None."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    key = NETNS_TAG.encode() + b"="
    for var in env.split(b"\0"):
        if var.startswith(key):
            return var[len(key):].decode(errors="replace")
    return None


def tagged(prefix: str) -> dict[str, list[int]]:
    """The processes started into namespaces whose names start with prefix, by namespace, named or not."""
    return _walk(lambda pid: tag if (tag := _tag(pid)) is not None and tag.startswith(prefix) else None)


def remove_namespaces(names: list[str], commands: Commands) -> None:
    """Kills every process in the namespaces, and every process started into them that lives elsewhere or in one
    of them that lost its name, then deletes them (their veths and qdiscs go with them). Best effort: never raises."""
    # each namespace held open until the last pass: a namespace nobody holds is freed with its name, and the
    # kernel gives its inode number to the next one made (the lowest free); a pair setting up beside then took
    # it, and its `ip -batch`, inside the new namespace while it made it, was SIGTERMed as this one's orphan
    # (study 001 run I, 2026-11-29)
    held = {}
    for n in names:
        try:
            held[n] = os.open(NETNS_DIR / n, os.O_RDONLY)
        except OSError:
            pass
    try:
        inodes = {os.fstat(fd).st_ino: n for n, fd in held.items()}
        in_them = lambda: [p for lst in _pids_by_inode(inodes, names, tagged=True).values() for p in lst]
        stop_pids(in_them)
        if held:
            try:
                commands.batch(["ip", "-force", "-batch", "-"], [["netns", "delete", n] for n in held])
            except Exception:
                for n in held:
                    commands.ok(["ip", "netns", "delete", n])
        # a process that entered a namespace after the last pass (an orphan of a killed run finishing its `ip
        # netns exec`) would keep it alive unnamed, out of every later clean's sight: found by the inode, which
        # outlives the name (and is still this namespace's: held above), and by its tag
        stop_pids(in_them)
    finally:
        for fd in held.values():
            os.close(fd)


def remove_namespace(ns: str, commands: Commands) -> None:
    remove_namespaces([ns], commands)
