"""The mininet testbed: the Topology realised by Mininet (Debian's `mininet`), with Linux-bridge or Open vSwitch
switches on its links.

Where the switches sit: every link of the Topology crosses one switch of its own,

    node A  eth_k ──veth── [switch w<i>] ──veth── eth_m  node B          (link i of the Topology)

so addresses (198.18.i.0/24), interface names (eth0, eth1, ...), static routes and every egress's tc are the
Topology's on both nodes, exactly as on the netns testbed, and each hop adds one store-and-forward L2 switch of
the chosen kind (topologies/switches.py). A router's access side is thus one switch per host port: a shared
segment would need a subnet per segment, not the Topology's per-link subnets. The switch ports carry no qdisc
of their own (veth's noqueue), so queues form only where the Topology puts them: the bottleneck is htb plus
the discipline on r1's egress, as on netns.

Nodes (hosts and routers) are Mininet hosts; routers forward (ip_forward). Every interface, switch ports
included, sends wire-sized packets (gso_max_segs 1, gso_max_size 1514, tso/gso/gro off: DESIGN.md's GSO trap).
An egress gets
  * our qdisc classes (topologies/links.py egress_argv) where the Topology asks for a queue: a discipline or a
    buffer (the bottleneck; pause_chain's queues), so it behaves exactly as on netns;
  * else Mininet's TCLink (htb `bw`, netem `delay`/`loss` with a netem limit that never drops) for the rest:
    rates, added delay and random loss.

Names: Mininet names nodes `<prefix>-<node>` (their shells show `mininet:<prefix>-<node>`), switches
`cm<tag>w<i>` and their ports `cm<tag>w<i>-a|-b` (`<tag>`: 5 characters hashed from the prefix; interface names
have 15 characters at most and live in the root namespace, so concurrent runs must not collide). Each run
records what it creates in /run/ccrig/mininet/<prefix>.json before creating it, so `cleanup()` (`ccrig
clean`) can remove what a killed run left: node shells and every process in their namespaces, bridges, ports,
and its hold on the Open vSwitch daemons.

Mininet's Python must run as root. ccrig does not let Mininet retune the host (Mininet.init's fixLimits
rewrites net.ipv4.tcp_rmem/tcp_wmem and other sysctls of the root namespace, which every new namespace copies):
netns and mininet runs must see the same TCP defaults.

The same Topo works on its own: `mn --custom topologies/mn_dumbbell.py --topo dumbbell,2 ...` (mn_*.py).
"""
from __future__ import annotations

import json
import logging
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
import zlib
from contextlib import contextmanager
from pathlib import Path

from mininet.link import Intf, Link, TCIntf, TCLink
from mininet.log import lg
from mininet.net import Mininet
from mininet.node import Node, OVSBridge
from mininet.nodelib import LinuxBridge
from mininet.topo import Topo
from mininet.util import specialClass

from ccrig.commands import Commands, batch_text
from ccrig.errors import InputError, RunError
from . import switches
from ..links import NETEM_LIMIT, egress_argv
from .switches import MininetOptions, OvsDaemons, owner, owner_alive
from ..testbed import Testbed
from ..topology import Egress, Topology

RECORDS = switches.STATE / "mininet"
MARK = "CCRIG_NODE"  # environment variable naming the node a process was started on
IFNAMSIZ = 15


# --- names ---------------------------------------------------------------------------------------------------

class Names:
    """Mininet names for a Topology's nodes and switches: plain (s1, w0) for `mn --custom`, prefixed for a run."""

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
    """An interface that hands its qdisc (and the next hop) wire-sized packets (DESIGN.md's GSO trap) with
    their checksums filled in: a userspace datapath (OVS netdev) forwards through AF_PACKET the packets whose
    checksum a veth left to offload as they are, and the receiver drops them as corrupt (Mininet's TCULink
    says as much), so TCP would stall while ping works."""
    wire = str(mtu + 14)
    return [["ip", "link", "set", "dev", dev, "mtu", str(mtu), "gso_max_segs", "1", "gso_max_size", wire,
             "gro_max_size", wire],
            ["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off"]]


def queue_by_ccrig(egress: Egress, mtu: int) -> bool:
    """Our qdisc classes carry an egress that asks for a queue (a discipline or a buffer), or a rate beyond
    what TCLink takes; TCLink carries the rest."""
    if egress.qdisc is not None or egress.buffer is not None:
        return True
    return egress.rate is not None and egress.rate.bps(mtu + 14) / 1e6 > TCIntf.bwParamMax


def tclink_params(egress: Egress, mtu: int) -> dict:
    """TCLink's parameters for an egress it carries ({} when the egress is the wire's)."""
    if queue_by_ccrig(egress, mtu):
        return {}
    p: dict = {}
    if egress.rate is not None:
        p["bw"] = egress.rate.bps(mtu + 14) / 1e6  # Mbit/s
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


def node_setup(topology: Topology, node: str) -> dict[str, list[list[str]]]:
    """node_setup_argv by program, so the testbed can feed `ip` and `tc` lines to one `-batch` process each."""
    ifs = topology.interfaces()[node]
    wire = [argv for x in ifs for argv in wire_argv(x.name, topology.mtu)]
    flows = max(1, len(topology.pairs))
    return {
        "sysctl": [["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]] if topology.node(node).role == "router" else [],
        "ip": [a for a in wire if a[0] == "ip"] + [["ip", "route", "add", subnet, "via", via]
                                                   for subnet, via in topology.routes()[node]],
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
                self.addLink(names.node(me), sw, port1=int(x.name.removeprefix("eth")), port2=1 if end == "a" else 2,
                             intfName1=x.name, intfName2=names.port(i, end),
                             params1={"ip": f"{x.address}/{x.prefix}", **params}, **opts)


def switch_class(kind: str):
    if kind == "lxbr":
        return LinuxBridge
    return specialClass(OVSBridge, defaults={"datapath": "user" if kind == "ovs-user" else "kernel"})


# --- the testbed --------------------------------------------------------------------------------------------

class MininetTestbed(Testbed):
    name = "mininet"

    def __init__(self, topology: Topology, commands: Commands, prefix: str, exp=None):
        super().__init__(topology, commands, prefix)
        self.options = getattr(exp, "mininet", None) or MininetOptions()
        self.names = Names(prefix)
        self.net: Mininet | None = None
        self.kind: str | None = None
        self.record_path = RECORDS / f"{prefix}.json"
        self.ovs: OvsDaemons | None = None
        self.timings: dict[str, float] = {}
        self.recorded = False  # the run's record is written: down() may remove what it names

    # -- the Testbed interface --
    def preflight(self) -> list[str]:
        out = []
        if os.geteuid() != 0:
            out.append("the mininet testbed needs root (Mininet's Python must run as root)")
        for tool, pkg in (("mnexec", "mininet"), ("ifconfig", "net-tools"), ("ethtool", "ethtool")):
            if not _which(tool):
                out.append(f"the mininet testbed needs `{tool}`: install the Debian package {pkg} (`make deps`)")
        if self.options.switch != "auto":
            out += switches.problems(self.options.switch, self.commands)
        return out

    def up(self) -> None:
        missing = self.preflight()
        if missing:
            raise InputError("testbed mininet: " + "; ".join(missing))
        self.kind = switches.choose(self.options.switch, self.commands)
        self._check_names_free()
        self._write_record()
        if self.kind in ("ovs", "ovs-user"):
            self.ovs = OvsDaemons(self.commands)
            self.ovs.hold(self.prefix)
        _prepare_mininet()
        topo = TopologyTopo(self.topology, names=self.names, setup=False)
        t0 = time.monotonic()
        with _mininet_errors("mininet: setting up the network"):
            self.net = Mininet(topo=topo, switch=switch_class(self.kind), host=TopologyNode, controller=None,
                               link=Link, build=False, autoSetMacs=False)
            self.net.build()
            t1 = time.monotonic()
            self.net.start()
        t2 = time.monotonic()
        self._configure()
        # where setup time goes (bench_setup reports it)
        self.timings = {"mininet_build_s": t1 - t0, "mininet_start_s": t2 - t1, "configure_s": time.monotonic() - t2}

    def _configure(self) -> None:
        """node_setup on every node and wire-sized switch ports, as one shell script (Commands.script): a
        process per command would take tens of seconds for a 30-sender dumbbell; the log holds the script."""
        steps: list[tuple[list[str], str | None]] = []
        for n in self.topology.nodes:
            setup = node_setup(self.topology, n.name)
            steps += [(self._on(n.name, argv), None) for argv in setup["sysctl"]]
            for prog in ("ip", "tc"):
                if setup[prog]:
                    steps.append((self._on(n.name, [prog, "-batch", "-"]), batch_text([a[1:] for a in setup[prog]])))
            steps += [(self._on(n.name, argv), None) for argv in setup["ethtool"]]
        ports = [argv for i in range(len(self.topology.links)) for end in "ab"
                 for argv in wire_argv(self.names.port(i, end), self.topology.mtu)]
        steps.append((["ip", "-batch", "-"], batch_text([a[1:] for a in ports if a[0] == "ip"])))
        steps += [(a, None) for a in ports if a[0] == "ethtool"]
        self.commands.script(steps)

    def down(self) -> None:
        # Not Mininet's stop(): it deletes the interfaces one at a time through the node shells (12 s for a
        # 30-sender dumbbell). Killing a node's processes frees its namespace and its veths at once; then the
        # bridges go in one command, and Mininet's node objects close their ptys.
        try:
            if not self.recorded:
                return  # up() stopped before creating anything; the names may be another run's
            record = _read_json(self.record_path) or self._record()
            _kill_node_processes(record, keep_shells=False)
            if self.net is not None:
                for node in self.net.hosts + self.net.switches:
                    try:
                        node.terminate()
                    except Exception:
                        pass
                self.net = None
            _purge(record, self.commands)
        except Exception:
            pass
        finally:
            if self.ovs is not None:
                self.ovs.release(self.prefix)
                self.ovs = None
            if self.recorded:
                self.record_path.unlink(missing_ok=True)
            self.recorded = False

    def run(self, node, argv, check=True, timeout=60):
        return self.commands.run(self._on(node, argv), check=check, timeout=timeout)

    def popen(self, node, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        return self.commands.popen(self._on(node, argv), stdout=stdout, stderr=stderr)

    def describe(self) -> dict:
        """What env.json should say about this testbed beyond the nodes: the switch kind, and where setup time
        went."""
        return {"switch": self.kind, "switch_requested": self.options.switch,
                "mininet_version": _mininet_version(),
                "setup_s": {k: round(v, 3) for k, v in self.timings.items()}}

    def python(self, node: str) -> list[str]:
        # Mininet hosts share the root file system: the interpreter running ccrig works on every node
        return [sys.executable]

    # -- details --
    def _on(self, node: str, argv: list[str]) -> list[str]:
        """argv as run on node: mnexec attaches to the node shell's network (and mount) namespace. The
        CCRIG_NODE mark lets `ccrig clean` find the process (and its children) once the run is gone: the node
        shells die with ccrig (their pty closes), processes started here do not."""
        if self.net is None:
            raise RunError(f"mininet: node {node} does not exist (the network is not up)")
        name = self.names.node(node)
        return ["mnexec", "-a", str(self.net[name].pid), "env", f"{MARK}={name}", *argv]

    def _record(self) -> dict:
        return {"prefix": self.prefix, "owner": owner(), "switch": self.kind,
                "nodes": [self.names.node(n.name) for n in self.topology.nodes],
                "switches": [self.names.switch(i) for i in range(len(self.topology.links))],
                "ports": [self.names.port(i, e) for i in range(len(self.topology.links)) for e in "ab"]}

    def _write_record(self) -> None:
        RECORDS.mkdir(parents=True, exist_ok=True)
        self.record_path.write_text(json.dumps(self._record()))
        self.recorded = True

    def _check_names_free(self) -> None:
        """Root-namespace names of this run must not exist yet (a prefix whose tag collides, or leftovers)."""
        taken = set(_root_links())
        clash = [n for n in self._record()["switches"] + self._record()["ports"] if n in taken]
        if clash:
            raise RunError(f"mininet: interfaces {', '.join(clash[:3])} already exist; a run with prefix "
                           f"{self.prefix} left them? run `ccrig clean --prefix {self.prefix}`")


def _mininet_version() -> str:
    from mininet.net import VERSION
    return VERSION


def _which(tool: str) -> bool:
    import shutil
    return shutil.which(tool) is not None


def _prepare_mininet() -> None:
    # Mininet.init would run fixLimits (host-wide sysctls, see the module's docstring); it only needs root,
    # which preflight checked, and enough file descriptors for a pty and pipes per node
    Mininet.inited = True
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record):
        text = record.getMessage().strip()
        if text:
            self.messages.append(text)


@contextmanager
def _mininet_errors(what: str):
    """Mininet reports many failures (a tc or ifconfig that failed) only as log lines, and some by exit():
    both become a RunError here."""
    handler = _Collect()
    lg.addHandler(handler)
    try:
        yield
    except SystemExit as e:
        raise RunError(f"{what}: Mininet gave up (exit {e.code}): {'; '.join(handler.messages) or 'no message'}") \
            from None
    except Exception as e:
        if type(e) is not Exception:  # Mininet raises bare Exceptions; Ctrl-C (the runner's) and ours pass
            raise
        raise RunError(f"{what}: {e}") from e
    finally:
        lg.removeHandler(handler)
    if handler.messages:
        raise RunError(f"{what}: " + "; ".join(m.replace("\n", " ") for m in handler.messages[:5]))


# --- finding and removing what a run made ----------------------------------------------------------------------

def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _root_links() -> list[str]:
    try:
        return os.listdir("/sys/class/net")
    except OSError:
        return []


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def node_shells(names: set[str] | None = None, prefix: str | None = None) -> dict[str, int]:
    """Mininet node shells (`bash ... mininet:<name>`) by name: those named in `names`, or starting with
    `prefix`."""
    out = {}
    for pid in _pids():
        argv = _cmdline(pid)
        tags = [a for a in argv if a.startswith("mininet:")]
        if not tags or not argv[0].endswith("bash"):
            continue
        name = tags[0].removeprefix("mininet:")
        if (names is not None and name in names) or (prefix is not None and name.startswith(prefix)):
            out[name] = pid
    return out


def _marked(pid: int) -> str | None:
    """The node a process was started on by MininetTestbed.run/popen (its CCRIG_NODE), if any."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    key = MARK.encode() + b"="
    return next((e[len(key):].decode(errors="replace") for e in env if e.startswith(key)), None)


def _kill_node_processes(record: dict, keep_shells: bool) -> int:
    """Kills every process on the record's nodes: those inside the node shells' namespaces (not the root
    namespace's: switches live there) and those marked with a node's name; optionally sparing the node shells
    themselves. Returns how many were signalled."""
    nodes = set(record.get("nodes", []))
    shells = node_shells(nodes)
    root = _netns(os.getpid())
    spaces = {_netns(pid) for pid in shells.values()} - {None, root}
    spare = (set(shells.values()) if keep_shells else set()) | {os.getpid()}
    count = 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        victims = [p for p in _pids() if p not in spare and (_netns(p) in spaces or _marked(p) in nodes)]
        for p in victims:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        count = max(count, len(victims))
        if victims and sig == signal.SIGTERM:
            _wait_gone(victims, 2.0)
    return count


def _wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return
        time.sleep(0.05)


def _purge(record: dict, commands: Commands) -> list[str]:
    """Removes whatever of the record is still there: processes in node namespaces (which frees the
    namespaces and their veths), node and switch shells, bridges and ports. Never raises."""
    said = []
    try:
        if _kill_node_processes(record, keep_shells=False):
            said.append(f"killed the processes of {record.get('prefix')}'s Mininet nodes")
        shells = node_shells(set(record.get("switches", [])))
        for pid in shells.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if shells:
            said.append(f"killed {len(shells)} Mininet switch shells of {record.get('prefix')}")
        present = set(_root_links())
        sws = record.get("switches", [])
        if record.get("switch") in ("ovs", "ovs-user") and sws and switches.ovs_installed():
            bridges = set(commands.run(["ovs-vsctl", "--timeout=10", "list-br"], check=False, timeout=20)
                          .stdout.split())
            mine = [s for s in sws if s in bridges]
            if mine:
                argv = ["ovs-vsctl", "--timeout=30"]
                for s in mine:
                    argv += ["--", "--if-exists", "del-br", s]
                commands.run(argv, check=False, timeout=60)
                said.append(f"deleted {len(mine)} Open vSwitch bridges of {record.get('prefix')}")
            present = set(_root_links())
        gone = [n for n in sws + record.get("ports", []) if n in present]
        if gone:
            commands.run(["ip", "-force", "-batch", "-"], check=False,
                         input=batch_text([["link", "del", "dev", n] for n in gone]))
            said.append(f"deleted {len(gone)} bridges and ports of {record.get('prefix')}")
    except Exception as e:
        said.append(f"could not remove all of {record.get('prefix')}'s Mininet network: {e}")
    return said


def _matches(run_prefix: str, prefix: str) -> bool:
    """Whether a run's things carry `prefix`: its names are `<run prefix>-...`, so `ccrig-`, `ccrig-4242` and
    `ccrig-4242-` all name the run ccrig-4242."""
    return (run_prefix + "-").startswith(prefix)


def leftovers(prefix: str) -> list[str]:
    """What Mininet runs whose prefix starts with `prefix` left: records, node and switch shells, processes in
    node namespaces, bridges and ports (for tests and `ccrig clean`)."""
    out = []
    names: set[str] = set()
    for path in sorted(RECORDS.glob("*.json")) if RECORDS.exists() else []:
        rec = _read_json(path)
        if _matches(str(rec.get("prefix", path.stem)), prefix):
            out.append(f"record {path}")
            names |= set(rec.get("switches", [])) | set(rec.get("ports", []))
            out += [f"switch shell {n}" for n in node_shells(set(rec.get("switches", [])))]
    out += [f"node shell {n}" for n in node_shells(prefix=prefix)]
    out += [f"process {p} on {node}" for p in _pids() if (node := _marked(p)) and node.startswith(prefix)]
    out += [f"interface {n}" for n in _root_links() if n in names]
    return out


def cleanup(commands: Commands, prefix: str = "ccrig-") -> list[str]:
    """`ccrig clean`: removes what Mininet runs with this name prefix left, unless their run is still going,
    and stops Open vSwitch if ccrig started it and no run holds it. One line per thing done."""
    said = []
    covered: set[str] = set()
    for path in sorted(RECORDS.glob("*.json")) if RECORDS.exists() else []:
        rec = _read_json(path)
        rec.setdefault("prefix", path.stem)
        if not _matches(str(rec["prefix"]), prefix):
            continue
        covered |= set(rec.get("nodes", []))
        if owner_alive(rec.get("owner", {})) and rec["owner"]["pid"] != os.getpid():
            said.append(f"kept the Mininet network of {rec['prefix']}: its run (pid {rec['owner']['pid']}) "
                        f"is still going")
            continue
        said += _purge(rec, commands)
        path.unlink(missing_ok=True)
        said.append(f"removed the Mininet record of {rec['prefix']}")
    # node shells no record names (a record removed by hand): their names carry the prefix
    stray = {n: p for n, p in node_shells(prefix=prefix).items() if n not in covered}
    stray.update({n: p for p in _pids() if (n := _marked(p)) and n.startswith(prefix) and n not in covered})
    if stray:
        said += _purge({"prefix": prefix, "nodes": list(stray)}, commands)
        for pid in stray.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        said.append(f"removed the processes of {len(stray)} Mininet nodes without a record, starting with {prefix}")
    if switches.OVS_STATE.exists():
        said += OvsDaemons(commands).release_dead(prefix)
    return said


# --- `mn --custom` ----------------------------------------------------------------------------------------

def mn_topo(name: str, defaults: dict, model=None):
    """A `topos` entry for `mn --custom`: `--topo NAME[,PAIRS][,path=value...]` builds the named topology from
    `defaults` (a spec's `topology:` section) with dotted paths overridden, e.g.
    `--topo dumbbell,4,bottleneck.rate=20mbit,rtt=10ms`. A topology registered in topologies.SPECS is validated
    as a spec's topology (its short forms such as `qdisc: pfifo` work); otherwise by `model`."""
    import copy

    def make(pairs: int = 2, **overrides) -> TopologyTopo:
        from ccrig.experiments import spec
        from .. import SPECS
        topo = {**copy.deepcopy(defaults), "name": name, "pairs": int(pairs)}
        for path, value in overrides.items():
            spec.set_path(topo, path, value, f"--topo {name}")
        if any(s.model_fields["name"].default == name for s in SPECS):
            raw = {"name": f"mn-{name}", "topology": topo, "flows": [{"count": int(pairs)}], "duration": "10s"}
            exp = spec.validate(raw, f"--topo {name}")
            return TopologyTopo(exp.topology.build(exp.n_flows))
        from pydantic import ValidationError
        try:
            built = model.model_validate(topo)
        except ValidationError as e:
            raise InputError(f"--topo {name}: {e}") from None
        return TopologyTopo(built.build(int(pairs)))
    return make
