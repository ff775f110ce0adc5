"""The mininet testbed: the Topology realised by Mininet (topo.py's Topo), every link through a switch of the
chosen kind (switches.py), every command run inside a node through mnexec and logged by Commands.

Nodes (hosts and routers) are Mininet hosts; routers forward (ip_forward). Every interface, switch ports
included, sends wire-sized packets (gso_max_segs 1, gso_max_size 1514, tso/gso/gro off: docs/architecture.md's GSO trap).
Linux bridges start all at once (switches.BatchBridge); ccrig's own settings (wire sizes, routes, qdiscs, ports
up) run as one logged shell script after Mininet's start.
A router's access side is one switch per host port: a shared segment would need a subnet per segment, not the
Topology's per-link subnets. The switch ports carry no qdisc of their own (veth's noqueue), so queues form only
where the Topology puts them: the bottleneck is htb plus the discipline on r1's egress, as on netns. Mininet
hosts share the root file system, so the base's python() (this interpreter) works on every node.

Mininet's Python must run as root. ccrig does not let Mininet retune the host (Mininet.init's fixLimits
rewrites net.ipv4.tcp_rmem/tcp_wmem and other sysctls of the root namespace, which every new namespace copies):
netns and mininet runs must see the same TCP defaults.
"""
from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import subprocess
import time
from contextlib import contextmanager

# Debian's Mininet, imported absolutely: this package is ccrig.topologies.testbeds.mininet, so the bare name
# `mininet` is never ours (no implicit relative imports in Python 3)
from mininet.link import Link
from mininet.log import lg
from mininet.net import VERSION, Mininet

from ccrig.commands import Commands, batch_text
from ccrig.errors import InputError, RunError
from ccrig.needs import Need
from ...testbed import Testbed
from ...topology import Topology
from . import switches
from .clean import MARK, RECORDS, cleanup, kill_node_processes, purge, root_links
from .switches import MininetOptions, OvsDaemons, owner, read_json, switch_class
from .topo import Names, TopologyNode, TopologyTopo, node_setup, wire_argv

TOOLS = {"mnexec": "mininet", "ifconfig": "net-tools", "ethtool": "ethtool"}


def requirements(options: MininetOptions, commands: Commands) -> list[Need]:
    """What the mininet testbed with these options needs of this machine."""
    by = "the mininet testbed"
    out = [Need("root privileges", by, os.geteuid() == 0, "Mininet's Python must run as root: run ccrig as root")]
    out += [Need(f"the `{tool}` command", by, shutil.which(tool) is not None,
                 f"install the Debian package {pkg} (`make deps`)") for tool, pkg in TOOLS.items()]
    if options.switch != "auto":
        out += switches.needs(options.switch, commands)
    return out


class MininetTestbed(Testbed):
    kind = "mininet"
    down_removes_nodes = True
    options = MininetOptions
    # the XOFF/XON controller reaches its nodes as named network namespaces or SSH hosts; Mininet's are neither
    emulated_pause = False

    def __init__(self, topology: Topology, commands: Commands, prefix: str, options: MininetOptions | None = None):
        super().__init__(topology, commands, prefix, options)
        self.names = Names(prefix)
        self.net: Mininet | None = None
        self.switch: str | None = None  # the switch kind in use (settings.switch with auto resolved)
        self.record_path = RECORDS / f"{prefix}.json"
        self.ovs: OvsDaemons | None = None
        self.timings: dict[str, float] = {}
        self.recorded = False  # the run's record is written: down() may remove what it names

    # -- the Testbed interface --
    @classmethod
    def needs(cls, experiment) -> list[Need]:
        return requirements(getattr(experiment, "mininet", None) or MininetOptions(), Commands(None))

    @classmethod
    def clean(cls, commands: Commands, prefix: str, keep) -> list[str]:
        return cleanup(commands, prefix, keep)

    def where(self, node: str) -> str:
        return f"Mininet host {self.names.node(node)}"

    def up(self) -> None:
        missing = [n.problem() for n in requirements(self.settings, self.commands) if not n.ok]
        if missing:
            raise InputError("testbed mininet: " + "; ".join(missing))
        self.switch = switches.choose(self.settings.switch, self.commands)
        self._check_names_free()
        self._write_record()
        if self.switch in ("ovs", "ovs-user"):
            self.ovs = OvsDaemons(self.commands)
            self.ovs.hold(self.prefix)
        _prepare_mininet()
        topo = TopologyTopo(self.topology, names=self.names, setup=False)
        t0 = time.monotonic()
        with _mininet_errors("mininet: setting up the network"):
            self.net = Mininet(topo=topo, switch=switch_class(self.switch, self.commands, self.names.group()),
                               host=TopologyNode, controller=None, link=Link, build=False, autoSetMacs=False)
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
        routes, ifs = self.topology.own_namespace_routes(), self.topology.interfaces()
        for n in self.topology.nodes:
            setup = node_setup(self.topology, n.name, routes, ifs)
            # without the CCRIG_NODE mark of _on(): these commands end here, `ccrig clean` never looks for them
            # (one exec less per command: 180 of them for a 30-sender dumbbell)
            enter = ["mnexec", "-a", str(self.net[self.names.node(n.name)].pid)]
            steps += [([*enter, *argv], None) for argv in setup["sysctl"]]
            for prog in ("ip", "tc"):
                if setup[prog]:
                    steps.append(([*enter, prog, "-batch", "-"], batch_text([a[1:] for a in setup[prog]])))
            steps += [([*enter, *argv], None) for argv in setup["ethtool"]]
        # the ports come up here (the Topo leaves them to the testbed: no `ifconfig up` per port)
        ports = [argv + (["up"] if argv[0] == "ip" else []) for i in range(len(self.topology.links))
                 for end in "ab" for argv in wire_argv(self.names.port(i, end), self.topology.mtu)]
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
            record = read_json(self.record_path) or self._record()
            kill_node_processes(record)
            if self.net is not None:
                for node in self.net.hosts + self.net.switches:
                    try:
                        node.terminate()
                    except Exception:
                        pass
                self.net = None
            purge(record, self.commands)
        except Exception:
            pass
        finally:
            if self.ovs is not None:
                self.ovs.release(self.prefix)
                self.ovs = None
            if self.recorded:
                self.record_path.unlink(missing_ok=True)
            self.recorded = False

    def run(self, node, argv, check=True, timeout=60, input=None):
        return self.commands.run(self._on(node, argv), check=check, timeout=timeout, input=input)

    def popen(self, node, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL):
        return self.commands.popen(self._on(node, argv), stdout=stdout, stderr=stderr, stdin=stdin)

    def describe(self) -> dict:
        """What env.json should say about this testbed beyond the nodes: the switch kind, and where setup time
        went."""
        return {"switch": self.switch, "switch_requested": self.settings.switch, "mininet_version": VERSION,
                "setup_s": {k: round(v, 3) for k, v in self.timings.items()}}

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
        return {"prefix": self.prefix, "owner": owner(), "switch": self.switch,
                "nodes": [self.names.node(n.name) for n in self.topology.nodes],
                "switches": [self.names.switch(i) for i in range(len(self.topology.links))],
                "ports": [self.names.port(i, e) for i in range(len(self.topology.links)) for e in "ab"],
                # the device group of the bridges and their ports (switches.BatchBridge), for one-request teardown
                "group": self.names.group() if self.switch == "lxbr" else None}

    def _write_record(self) -> None:
        RECORDS.mkdir(parents=True, exist_ok=True)
        self.record_path.write_text(json.dumps(self._record()))
        self.recorded = True

    def _check_names_free(self) -> None:
        """Root-namespace names of this run must not exist yet (a prefix whose tag collides, or leftovers)."""
        taken = set(root_links())
        record = self._record()
        clash = [n for n in record["switches"] + record["ports"] if n in taken]
        if clash:
            raise RunError(f"mininet: interfaces {', '.join(clash[:3])} already exist; a run with prefix "
                           f"{self.prefix} left them? run `ccrig clean --prefix {self.prefix}`")


def _prepare_mininet() -> None:
    # Mininet.init would run fixLimits (host-wide sysctls, see the module's docstring); it only needs root,
    # which up() checked, and enough file descriptors for a pty and pipes per node
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
