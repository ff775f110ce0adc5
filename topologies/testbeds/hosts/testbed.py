"""HostsTestbed: a Topology realised on the machines an inventory names, every command over their SSH
connections (see the package's docstring for the two bottleneck modes and what up() and down() do)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.needs import Need
from ccrig.ports import client_port_problem
from ...links import egress_argv
from ...testbed import Testbed
from ...topology import Interface, Topology
from .clean import close_ssh_connections
from .hooks import HostsHooks
from .inventory import BOTTLENECK_MODES, PROJECT, Inventory, InventoryHost, inventory_path
from .ssh import SshHost, close_all, connect_all, unplayable
from .undo import UNDO_SCRIPT, UndoJournal, offloads, run_dir

SWITCH_SUBNET = "198.18.255"
# tools the testbed itself runs on every host (the workloads and collectors add iperf3 and python3)
HOST_TOOLS = ("ip", "tc", "ethtool", "sysctl", "iperf3", "python3", "ss", "tcpdump", "bpftool")
# answers each line read with the host's time, for the clock offset
CLOCK_ECHO = "import sys, time\nfor _ in sys.stdin: print(repr(time.time()), flush=True)"


@dataclass
class _Port:
    """One topology interface as it is realised on a host."""
    node: str
    dev: str               # the host's real interface
    iface: Interface        # the topology's view of it
    address: str
    prefix: int


class HostsTestbed(HostsHooks, Testbed):
    kind = "hosts"
    real_nics = True
    remote = True

    def __init__(self, topology: Topology, commands: Commands, prefix: str, options=None, *,
                 inventory: Path | None = None, bottleneck: str | None = None):
        # the inventory (--inventory, else $CCRIG_INVENTORY) and its bottleneck mode are the lab's, not the
        # spec's: the hosts testbed has no spec section (options stays None); tests name them directly
        super().__init__(topology, commands, prefix, options)
        self.inventory_path = inventory_path(inventory)
        self._inventory: Inventory | None = None
        self._bottleneck = bottleneck
        self.conns: dict[str, SshHost] = {}
        self.hosts: dict[str, InventoryHost] = {}      # node -> host
        self.ports: dict[str, list[_Port]] = {}       # node -> its realised interfaces
        self.clock: dict[str, dict] = {}               # node -> {"offset_s", "uncertainty_s"}
        self.kernels: dict[str, str] = {}
        self.undo = UndoJournal()
        self._control_dir: Path | None = None
        self._dirs: set[str] = set()                   # nodes whose run directory exists on their host
        self._staged: dict[tuple[str, str], str] = {}  # (node, local path) -> its copy there
        self._procs: dict[str, list[str]] = {}         # node -> remote pid files
        self._seq = 0
        self._lock = threading.Lock()
        self._prepared = False

    @classmethod
    def needs(cls, experiment) -> list[Need]:
        return [Need("the `ssh` command", "testbed: hosts", shutil.which("ssh") is not None,
                     "install the Debian package openssh-client")]

    @classmethod
    def clean(cls, commands: Commands, prefix: str, keep) -> list[str]:
        """The SSH masters killed runs left here; what they left on the hosts needs the inventory (`ccrig clean
        -i`: clean.clean_inventory)."""
        return close_ssh_connections(prefix, commands, keep)

    # --- mapping -------------------------------------------------------------------------------------
    @property
    def inventory(self) -> Inventory:
        if self._inventory is None:
            self._inventory = Inventory.load(self.inventory_path, self.commands, arg="inventory")
        return self._inventory

    @property
    def bottleneck_mode(self) -> str:
        mode = self._bottleneck or self.inventory.bottleneck_mode()
        if mode not in BOTTLENECK_MODES:
            raise InputError(f"bottleneck: got {mode!r}; expected one of {', '.join(BOTTLENECK_MODES)}")
        return mode

    def owned(self, node: str) -> bool:
        """Whether ccrig configures node (False for the switch's nodes in switch mode)."""
        return not (self.bottleneck_mode == "switch" and self.topology.node(node).role == "router")

    def where(self, node: str) -> str:
        h = self.hosts.get(node)
        if h is None:
            return super().where(node)
        return f"node {node} on host {h.name}, {h.user}@{h.address}:{h.port}"

    def _map(self) -> list[str]:
        """Maps nodes to hosts and topology interfaces to host interfaces; returns the problems found."""
        inv, topo, problems = self.inventory, self.topology, []
        switch = self.bottleneck_mode == "switch"
        self.hosts, self.ports = {}, {}
        ifs = topo.interfaces()
        end_hosts = [n.name for n in topo.nodes if self.owned(n.name)]
        for n in topo.nodes:
            h = inv.host_for(n.name)
            if not self.owned(n.name):
                if h is not None:
                    problems.append(f"{h.where} plays node {n.name}, a router, but ccrig_bottleneck is switch: "
                                    f"the routers are the hardware switch; remove it or use router mode")
                for x in ifs[n.name]:
                    e = x.egress
                    if e.needs_netem:
                        problems.append(f"node {n.name} (the switch) toward {x.peer}: delay/loss cannot be "
                                        f"applied by a hardware switch; set the spec's rtt and loss to 0 or use "
                                        f"a Linux router host (ccrig_bottleneck: router)")
                continue
            why = unplayable(n.name, h, inv.path)
            if why:
                problems.append(why)
                continue
            self.hosts[n.name] = h
            ports = []
            for x in ifs[n.name]:
                dev = h.interfaces.get(x.peer) or h.interface
                if switch and dev is None and len(h.interfaces) == 1:
                    dev = next(iter(h.interfaces.values()))
                if dev is None:
                    problems.append(f"{h.where} (node {n.name}): no interface toward {x.peer}; set "
                                    f"ccrig_interfaces: {{{x.peer}: DEV}} (or ccrig_interface: DEV)")
                    continue
                if switch:
                    address, plen = f"{SWITCH_SUBNET}.{end_hosts.index(n.name) + 1}", 24
                else:
                    address, plen = x.address, x.prefix
                ports.append(_Port(n.name, dev, x, address, plen))
            if switch:  # one segment: one address per host, whatever the number of topology links
                ports = ports[:1]
            self.ports[n.name] = ports
        return problems

    # --- preflight -----------------------------------------------------------------------------------
    def preflight(self) -> list[str]:
        """Checks the inventory, the mapping and every host (reachable, root, interfaces, tools) and keeps
        the connections for up()."""
        if self._prepared:
            return []
        problems = self._map()
        if problems:
            return problems
        self._control_dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-ssh-"))
        wanted = {h.name: sorted({p.dev for p in self.ports[n]}) for n, h in self.hosts.items()}
        self.conns, problems = connect_all(list(self.hosts.values()), self.commands, self._control_dir,
                                           wanted, HOST_TOOLS)
        self.conns = {n: self.conns[h.name] for n, h in self.hosts.items()}
        if not problems:   # a sender binds each flow's client port: none may be the kernel's to hand out
            for node in sorted({s for s, _ in self.topology.pairs} & set(self.conns)):
                ranges = self.conns[node].run(["cat", "/proc/sys/net/ipv4/ip_local_port_range",
                                               "/proc/sys/net/ipv4/ip_local_reserved_ports"], timeout=10).stdout
                lines = ranges.splitlines() + ["", ""]
                problem = client_port_problem(self.hosts[node].where, lines[0], lines[1])
                if problem:
                    problems.append(problem)
        self._prepared = not problems
        return problems

    # --- up ------------------------------------------------------------------------------------------
    def up(self) -> None:
        problems = self.preflight()
        if problems:
            self.down()
            raise InputError("hosts testbed: " + "; ".join(problems))
        try:
            self._measure_clocks()
            self._each(self._prepare_host)
            for node, ports in self.ports.items():
                for p in ports:
                    # replace: an address left by a run that died is taken over, not an error
                    self.run(node, ["ip", "addr", "replace", f"{p.address}/{p.prefix}", "dev", p.dev])
            if self.bottleneck_mode == "router":
                for node, routes in self.topology.routes().items():
                    # in undo.sh before they exist: a run killed in between leaves nothing clean cannot undo
                    self.undo.routes(node, routes)
                    self._write_undo(node)
                    for subnet, via in routes:
                        self.run(node, ["ip", "route", "replace", subnet, "via", via])
            flows = max(1, len(self.topology.pairs))
            for node, ports in self.ports.items():
                for p in ports:
                    for argv in egress_argv(p.dev, p.iface.egress, self.topology.mtu, flows):
                        self.run(node, argv)
        except BaseException:
            self.down()
            raise

    def _each(self, fn) -> None:
        """fn(node) on every host in parallel; the first error is raised after all finished."""
        with ThreadPoolExecutor(max_workers=min(16, max(1, len(self.hosts)))) as pool:
            for _ in pool.map(fn, list(self.hosts)):
                pass

    def _measure_clocks(self) -> None:
        """Each host's clock minus ours, NTP-style: over one open session (so no session set-up sits inside
        the round trip) ask the host's time a few times; the sample with the shortest round trip wins and its
        error is at most half that round trip."""
        def measure(node: str) -> None:
            p = self.conns[node].popen(["python3", "-u", "-c", CLOCK_ECHO], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, root=False)
            best = None
            try:
                for _ in range(8):
                    t0 = time.time()
                    p.stdin.write(b"\n")
                    p.stdin.flush()
                    line = p.stdout.readline()
                    t1 = time.time()
                    if not line:
                        why = p.stderr.read().decode(errors="replace").strip()
                        raise RunError(f"{self.hosts[node].where}: no clock reading: {why}")
                    if best is None or t1 - t0 < best[1]:
                        best = (float(line) - (t0 + t1) / 2, t1 - t0)
            finally:
                p.stdin.close()
                p.wait(10)
            self.clock[node] = {"offset_s": best[0], "uncertainty_s": best[1] / 2}
            self.kernels[node] = self.run(node, ["uname", "-r"], timeout=10).stdout.strip()
        self._each(measure)

    def _prepare_host(self, node: str) -> None:
        """Records each port's settings (and forwarding on a router) in the host's undo.sh first, then makes
        the ports send wire-sized packets (see topologies/testbeds/netns.py)."""
        wire = str(self.topology.wire)
        router = self.topology.node(node).role == "router"
        if router:
            self.undo.forwarding(node, self.run(node, ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip())
        for p in self.ports[node]:
            link = json.loads(self.run(node, ["ip", "-d", "-j", "link", "show", "dev", p.dev]).stdout)[0]
            feats = self.run(node, ["ethtool", "-k", p.dev]).stdout
            self.undo.port(node, p.dev, f"{p.address}/{p.prefix}", {
                "mtu": link.get("mtu"), "gso_max_segs": link.get("gso_max_segs"),
                "gso_max_size": link.get("gso_max_size"), "gro_max_size": link.get("gro_max_size"),
                "features": offloads(feats),
                "up": "UP" in link.get("flags", []),
            })
        self._write_undo(node)
        if router:
            self.run(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        for p in self.ports[node]:
            self.run(node, ["ip", "link", "set", "dev", p.dev, "mtu", str(self.topology.mtu)])
            self.run(node, ["ip", "link", "set", "dev", p.dev, "gso_max_segs", "1", "gso_max_size", wire,
                            "gro_max_size", wire])
            self.run(node, ["ethtool", "-K", p.dev, "tso", "off", "gso", "off", "gro", "off"], check=False)
            self.run(node, ["ip", "link", "set", "dev", p.dev, "up"])

    # --- commands on nodes ---------------------------------------------------------------------------
    def _conn(self, node: str) -> SshHost:
        try:
            return self.conns[node]
        except KeyError:
            raise RunError(f"node {node}: not a host of this testbed (in switch mode the routers are the "
                           f"switch); hosts: {', '.join(self.conns) or 'none connected'}") from None

    def run(self, node, argv, check=True, timeout=60, input=None):
        conn = self._conn(node)
        return conn.run(self._staged_argv(node, argv), check=check, timeout=timeout, input=input)

    def popen(self, node, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL):
        """A command without stdin of its own leaves its pid in the run's directory there, for down() to end
        should it outlive its ssh; one given a stdin reads ssh's and ends with it (SshHost.popen)."""
        conn = self._conn(node)
        argv = self._staged_argv(node, argv)
        if stdin is not subprocess.DEVNULL:
            return conn.popen(argv, stdin=stdin, stdout=stdout, stderr=stderr)
        with self._lock:
            self._seq += 1
            pidfile = f"{self._remote_dir(node)}/p{self._seq}.pid"
            self._procs.setdefault(node, []).append(pidfile)
        self._ensure_remote_dir(node)
        return conn.popen(argv, stdout=stdout, stderr=stderr, pidfile=pidfile)

    def end(self, node, proc):
        self._conn(node).end(proc)

    def put(self, node: str, path: str, data: str | bytes, mode: int = 0o644) -> None:
        """Writes a file on node's host, as root."""
        self._conn(node).put(path, data, mode)

    def python(self, node: str) -> list[str]:
        return ["python3"]

    def address(self, node: str) -> str:
        if node in self.ports and self.ports[node]:
            return self.ports[node][0].address
        return self.topology.address(node)

    def egress_device(self, a: str, b: str) -> str:
        for p in self.ports.get(a, []):
            if p.iface.peer == b or self.bottleneck_mode == "switch":
                return p.dev
        raise RunError(f"node {a}: no interface toward {b} on this testbed "
                       f"({'the switch is not ours' if not self.owned(a) else 'not mapped'})")

    def clock_offset(self, node: str) -> float:
        """Host clock minus this machine's, in seconds: subtract it from times the host reports."""
        return self.clock.get(node, {}).get("offset_s", 0.0)

    def describe(self) -> dict:
        """What env.json should say about the hosts: mapping, clocks, kernels, what is not ours."""
        return {
            "inventory": str(self.inventory_path), "bottleneck": self.bottleneck_mode,
            "nodes": {n: {"host": h.name, "address": h.address, "kernel": self.kernels.get(n),
                          "interfaces": {p.iface.peer: p.dev for p in self.ports.get(n, [])},
                          "clock": self.clock.get(n)} for n, h in self.hosts.items()},
            "not_applied": [] if self.bottleneck_mode == "router" else [
                f"{n.name}: the hardware switch (its rate and queue are the lab's configuration)"
                for n in self.topology.nodes if not self.owned(n.name)],
        }

    # --- the run's directory on each host: pid files, staged files, undo.sh ---------------------------
    def _remote_dir(self, node: str) -> str:
        return run_dir(self.prefix, self.hosts[node].name)

    def _ensure_remote_dir(self, node: str) -> None:
        if node not in self._dirs:
            self._conn(node).run(["mkdir", "-p", self._remote_dir(node)], root=False)
            self._dirs.add(node)

    def _staged_argv(self, node: str, argv: list[str]) -> list[str]:
        """argv with every project file it names replaced by that file's copy on the host."""
        out = []
        for word in argv:
            p = Path(word) if word.startswith("/") else None
            if p is not None and p.is_file() and PROJECT in p.resolve().parents:
                word = self.stage(node, p)
            out.append(word)
        return out

    def _put_in_run_dir(self, node: str, name: str, data: str | bytes) -> str:
        """Writes a file into the run's directory on node's host (as the login user, who owns it); returns
        its path there."""
        self._ensure_remote_dir(node)
        remote = f"{self._remote_dir(node)}/{name}"
        self._conn(node).put(remote, data, root=False)
        return remote

    def stage(self, node: str, path: Path) -> str:
        """Copies path to the host once."""
        key = (node, str(path))
        with self._lock:
            if key in self._staged:
                return self._staged[key]
        remote = self._put_in_run_dir(node, path.name, path.read_bytes())
        with self._lock:
            self._staged[key] = remote
        return remote

    def remember_undo(self, node: str, argv: list[str]) -> None:
        """A command that undoes a change its caller made on node's host and restores itself (a NIC's PAUSE
        setting): run by `ccrig clean -i` from the host's undo.sh should this process die before that."""
        self.undo.remember(node, argv)
        self._write_undo(node)

    def _write_undo(self, node: str) -> None:
        """Keeps UNDO_SCRIPT in the run's directory on the host current."""
        self._put_in_run_dir(node, UNDO_SCRIPT, self.undo.script(node, self.prefix))

    # --- down ----------------------------------------------------------------------------------------
    def down(self) -> None:
        """Restores every host; best effort, never raises, safe to call twice."""
        def restore(node: str) -> None:
            conn = self.conns.get(node)
            if conn is None or conn.master is None:
                return
            try:
                self._restore_host(node, conn)
            except Exception as e:  # a host that went away must not stop the others' restore, nor go unsaid
                sys.stderr.write(f"warning: hosts testbed: {self.where(node)}: {e}\n")
        try:
            with ThreadPoolExecutor(max_workers=min(16, max(1, len(self.conns)))) as pool:
                list(pool.map(restore, list(self.conns)))
        finally:
            close_all(self.conns, self._control_dir)
            self.conns, self._control_dir, self._prepared = {}, None, False
            self._dirs.clear()
            self._staged.clear()
            self._procs.clear()
            self.undo.clear()

    def _restore_host(self, node: str, conn: SshHost) -> None:
        def quiet(argv):
            try:
                conn.run(argv, check=False, timeout=20)
            except RunError:
                pass
        conn.close_stdin()
        pidfiles = self._procs.get(node, [])
        if pidfiles:
            # the wrappers end their commands when our ssh goes; these are the ones that outlived it
            kill = ('for f in "$@"; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done; sleep 0.5; '
                    'for f in "$@"; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done; true')
            quiet(["sh", "-c", kill, "kill", *pidfiles])
        # the remembered commands' owners restore those themselves (PauseRun its NICs)
        for argv in self.undo.commands(node, remembered=False):
            quiet(argv)
        if node in self.hosts:
            # a run folder that stays (CI once found a router's, undo.sh alone in it) is said, with the way out,
            # rather than left for the next run to meet
            why = conn.remove_dir(self._remote_dir(node), timeout=20)
            if why:
                raise RunError(f"its run folder {self._remote_dir(node)} stays ({why}); "
                               f"`ccrig clean -i INVENTORY --prefix {self.prefix}` removes it")
