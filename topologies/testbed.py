"""What a testbed is: something that realises a Topology and runs commands on its nodes.

The runner, preflight, cleanup, PAUSE and the collectors only ever talk to this interface and ask a testbed what
it can do (the class attributes and classmethods below); none of them tests which testbed it has. Each testbed is
one module of topologies/testbeds/, found by its `kind` (topologies/testbeds/__init__.py). Like Mininet's Node, a
testbed runs argv lists "on a node"; the argv is logged by Commands.
"""
from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
from abc import ABC, abstractmethod
from contextlib import contextmanager
from pathlib import Path

from typing import Callable, ClassVar, Iterator

from pydantic import BaseModel

from ccrig import fanout
from ccrig.commands import Commands, Node
from ccrig.needs import Need
from .topology import Topology


ECHOES, ECHO_GAP_S = 3, 0.2   # a path's measured echo: the least of three requests, 0.2 s apart


def echo_rtt(text) -> float | None:
    """The round trip (s) of ping's summary line (iputils `rtt min/avg/...`, busybox `round-trip min/avg/...`):
    its least; None when no reply came."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    m = re.search(r"min/avg/max\S* = ([0-9.]+)/", text or "")
    return round(float(m.group(1)) / 1e3, 6) if m else None


class Testbed(ABC):
    # the spec's `testbed:` value that names it
    kind: ClassVar[str] = "abstract"
    # the model of its spec section (`<kind>: {...}`), or None when it takes no options
    options: ClassVar[type[BaseModel] | None] = None
    # its links can be real NICs, with Ethernet flow control (PAUSE modes ethtool and frames)
    real_nics: ClassVar[bool] = False
    # it can run the emulated XOFF/XON controller on its pause chain (tc on the nodes, read over netlink)
    emulated_pause: ClassVar[bool] = True
    # its nodes are other machines (hosts): their kernels, laws, tools and clocks are theirs, checked and used
    # over the testbed's connections instead of this machine's
    remote: ClassVar[bool] = False
    # it runs the whole spec somewhere else (the vm testbed: a guest kernel) instead of realising the topology
    # in this process; the command line then hands the run over to run_spec(), a study to run_specs_elsewhere()
    elsewhere: ClassVar[bool] = False
    # where it runs specs elsewhere, the testbed of that place that realises them (the vm's guest: netns)
    inner: ClassVar[str | None] = None
    # two of its repetitions can run side by side on this machine, each under a prefix of its own (every name it
    # makes lives in namespaces named from the prefix; root-namespace names, such as Mininet's, are too short)
    side_by_side: ClassVar[bool] = False
    # it builds a topology with `gso: true` (senders keep their super-packets, tbf cuts them at each shaped link:
    # qdiscs/shaper.py); the others send wire packets everywhere and refuse it
    gso: ClassVar[bool] = False
    # popen() returns the process itself, so a signal sent to its pid reaches the command (not so when it is a
    # local ssh client standing for a remote one): the workloads may start senders early and signal them to go
    signals_reach_popen = False
    # it puts a delay line (topologies/delayline) on each delayed link when the run asks for one (`delay: {via:
    # line}`, or auto on a kernel without netem); the others make delay with netem alone and refuse the line
    delay_lines: ClassVar[bool] = False

    # down() removes the nodes themselves (namespaces) and with them what was set inside (routes): a change made
    # there needs no undo of its own before down()
    down_removes_nodes: ClassVar[bool] = False

    def __init__(self, topology: Topology, commands: Commands, prefix: str, options: BaseModel | None = None):
        self.topology = topology
        self.commands = commands
        # every name this testbed creates starts with prefix (e.g. "ccrig-4242"), so `ccrig clean` finds it
        self.prefix = prefix
        # the spec's section for this testbed (an instance of `options`), or its defaults
        self.settings = options if options is not None else (self.options() if self.options else None)
        # the delay lines up() puts in the topology (topologies/delayline.Line), set by the runner before up()
        self.lines: list = []

    @classmethod
    def needs(cls, experiment) -> list[Need]:
        """What this testbed needs of this machine for the experiment, checked before anything is set up."""
        return []

    @classmethod
    def clean(cls, commands: Commands, prefix: str, keep) -> list[str]:
        """Removes what runs of this testbed left behind (names starting with prefix) after they were killed;
        keep(name) spares what belongs to a run still going. Returns one sentence per thing removed."""
        return []

    @classmethod
    def clean_everywhere(cls, commands: Commands, prefix: str, inventory: Path | None,
                         alive: Callable[[str], bool]) -> list[str]:
        """Removes what killed runs left on the other machines this testbed uses, found from the inventory (`ccrig
        clean -i`; None: none given): their processes, files, settings and laws. alive(run prefix) -> True
        spares a run still going when every run is cleaned. Returns one sentence per thing removed."""
        return []

    @classmethod
    @contextmanager
    def law_systems(cls, nodes: list[str], commands: Commands, prefix: str) -> Iterator[dict]:
        """Where the flows' congestion-control laws are loaded, for as long as the with block lasts (a whole run,
        outliving each repetition's testbed): {sender node, or None for this machine: its System, or None for
        this machine's}. Here every law goes to this machine's kernel; a remote testbed connects to the senders'
        machines (nodes) and yields their systems."""
        yield {None: None}

    @classmethod
    def run_specs_elsewhere(cls, args: list[str], out_root: Path, options: BaseModel | None, timeout: float,
                            name: str) -> tuple[int | str, Callable[[Path], None]]:
        """Runs `ccrig ARGS` where this testbed runs specs (`elsewhere`), its results written under out_root;
        returns that ccrig's exit status (or why it was stopped: what it finished before stays) and a function that
        marks a run directory it wrote as this testbed's.
        options: the spec's section for this testbed; name: a unique name for what it starts here."""
        raise NotImplementedError(f"the {cls.kind} testbed runs specs in this process")

    def machine(self, node: str) -> str | None:
        """The machine node is on when it is not this one (a host of the hosts testbed), as messages name it."""
        return None

    def preflight(self) -> list[str]:
        """What this machine lacks to realise the topology, each as a sentence saying how to get it."""
        return []

    def describe(self) -> dict:
        """env.json's `topology`: per node, its interfaces' qdisc trees and offload settings as the kernel reports
        them after up(). A testbed that knows more (hosts: the mapping, clock offsets) adds it. One command per
        node (DESCRIBE), the nodes side by side: two per interface took 9.5 s of an 8-pair dumbbell's set-up in an
        emulated guest."""
        out = {"testbed": self.kind, "prefix": self.prefix, "nodes": {}}
        nodes = self.topology.interfaces()
        texts = fanout.each(lambda n: self.run(n, ["sh", "-c", DESCRIBE, "sh", *(i.name for i in nodes[n])],
                                               check=False).stdout, nodes)
        for (node, ifs), text in zip(nodes.items(), texts):
            qdiscs, offloads = _described(text)
            out["nodes"][node] = {
                i.name: {"address": f"{i.address}/{i.prefix}", "peer": i.peer,
                         "qdisc": json.dumps([q for q in qdiscs if q.get("dev") == i.name], separators=(",", ":"))
                         if qdiscs is not None else "",
                         "offload": offloads.get(i.name, {})}
                for i in ifs}
        return out

    def stop_lines(self) -> dict[str, dict]:
        """Stops the delay lines and returns each direction's counters (topologies/delayline.summarise); {} where
        there are none. down() stops them too."""
        return {}

    def node(self, name: str) -> Node:
        """The node as a place to run commands (ccrig.commands.Node), for code that acts on one node."""
        return _OnNode(self, name)

    def where(self, node: str) -> str:
        """The node as a person finds it, for messages: a namespace, a Mininet host, a host over SSH."""
        return f"node {node}"

    def owned(self, node: str) -> bool:
        """Whether this testbed set up the node itself (a hosts run may leave a switch's queue alone)."""
        return True

    def clock_offset(self, node: str) -> float:
        """The node's clock minus this machine's, in seconds (0 where they share one clock)."""
        return 0.0

    def put(self, node: str, path: str, data: str | bytes, mode: int = 0o644) -> None:
        """Writes a file on node (here: the machine's own file system)."""
        self.commands.note(["install", "-m", f"{mode:o}", "/dev/stdin", path], "put")
        Path(path).write_bytes(data.encode() if isinstance(data, str) else data)
        Path(path).chmod(mode)

    @abstractmethod
    def up(self) -> None:
        """Creates nodes, links, addresses, routes and the links' tc (rate, discipline, buffer, delay)."""

    @abstractmethod
    def down(self) -> None:
        """Removes everything up() made. Idempotent and best effort: it never raises."""

    @abstractmethod
    def run(self, node: str, argv: list[str], check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Runs argv on node and waits."""

    @abstractmethod
    def popen(self, node: str, argv: list[str], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
              stdin=subprocess.DEVNULL) -> subprocess.Popen:
        """Starts argv on node in the background (killing the Popen's process group stops it)."""

    def resolve_neighbours(self, pairs: list[tuple[str, str]], wait_s: float) -> dict[tuple[str, str], float | None]:
        """One echo request from each sender to its receiver, all at once, before any flow connects: every hop's
        neighbour (ARP) entry on the way there and back is made now, not by a flow's SYN, which would wait for it
        (across a delayed link for a whole round trip of that link: handshake RTTs of 133-200 ms were seen at
        100 ms configured), and TCP's min RTT, which the delay check reads, keeps that first sample. The reply
        itself is not needed (random loss may drop it): the requests' ARP exchanges leave the entries both ways.
        Then a second round, the neighbours known and the queues empty: each path's round trip as the delay line
        made it, before any flow (None where no reply came). The delay check reads it beside TCP's min RTT,
        which can only be the queue's too where every flow on a path connected behind the others' data (a TCG
        guest starts six senders over 0.2-1.3 s, and a window doubling each RTT fills the queue within it)."""
        self._echo(pairs, wait_s, capture=False)
        return self._echo(pairs, wait_s, capture=True)

    def _echo(self, pairs: list[tuple[str, str]], wait_s: float, capture: bool
              ) -> dict[tuple[str, str], float | None]:
        """One echo request per pair, all at once; captured: ECHOES each, and the least round trip of each pair's
        replies (ping's own figure)."""
        pairs = sorted(set(pairs))
        out = subprocess.PIPE if capture else subprocess.DEVNULL
        # measured: the least of ECHOES requests ECHO_GAP_S apart, as TCP's min RTT is a least: one reply can be
        # late by its sender's or receiver's wake-up (a TCG guest's single echoes read 1-54 ms above a 100 ms path)
        count = ["-c", str(ECHOES), "-i", str(ECHO_GAP_S)] if capture else ["-c", "1"]
        procs = [self.popen(src, ["ping", "-n", "-q", *count, "-W", str(max(1, math.ceil(wait_s))),
                                  self.address(dst)], stdout=out) for src, dst in pairs]
        rtts: dict[tuple[str, str], float | None] = {}
        try:
            for pair, p in zip(pairs, procs):
                text = p.communicate(timeout=wait_s + 30)[0] if capture else p.wait(timeout=wait_s + 30)
                rtts[pair] = echo_rtt(text) if capture else None
        except subprocess.TimeoutExpired:
            pass
        finally:   # on a timeout or a Ctrl-C too: no ping outlives this
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return rtts

    def end(self, node: str, proc: subprocess.Popen) -> None:
        """Asks a command popen() started to finish (SIGTERM), so it can still report before it exits."""
        proc.send_signal(signal.SIGTERM)

    def remember_undo(self, node: str, argv: list[str]) -> None:
        """Notes a command that would undo a change made on node, for `ccrig clean` to run should this process
        die before it restored the change itself. Here nothing to do: a node of this machine is a namespace,
        and clean removes it with whatever was set inside; the hosts testbed keeps it on the host."""

    def stage(self, node: str, path: Path) -> str:
        """Where node finds the file at path of this machine (a copy on a remote host)."""
        return str(path)

    def address(self, node: str) -> str:
        """The node's address on the experiment network."""
        return self.topology.address(node)

    def egress_device(self, a: str, b: str) -> str:
        """The interface on node a that transmits toward b (where tc for that direction lives)."""
        return self.topology.egress_of(a, b).name

    def netns_path(self, node: str) -> str | None:
        """A path on this machine that enters the node's network namespace (setns), or None where the node is not
        a namespace of this machine that this process can enter by path (a host over SSH, a Mininet host)."""
        return None

    def python(self, node: str) -> list[str]:
        """The argv prefix that runs a Python 3 interpreter on node (samplers run through it)."""
        return [sys.executable]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()


class _OnNode:
    """One node of a testbed as a ccrig.commands.Node."""

    def __init__(self, testbed: Testbed, name: str):
        self.testbed, self.name = testbed, name

    def run(self, argv: list[str], check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        return self.testbed.run(self.name, argv, check=check, timeout=timeout, input=input)

    def popen(self, argv: list[str], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL) -> subprocess.Popen:
        return self.testbed.popen(self.name, argv, stdout=stdout, stderr=stderr, stdin=stdin)

    def put(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        self.testbed.put(self.name, path, data, mode)


# a node's qdiscs (all its devices, as JSON), then each interface's offloads after a line naming it
DESCRIBE = 'tc -j qdisc show; for dev; do echo "== $dev"; ethtool -k "$dev"; done'
# the offloads wire-sized packets need off: `ethtool -k`'s names -> `ethtool -K`'s
OFFLOADS = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
            "generic-receive-offload": "gro"}


def offload_states(ethtool_k: str) -> dict[str, str]:
    """OFFLOADS as `ethtool -k` shows them: "off", "on", "on [fixed]"... (its other lines are left out)."""
    out = {}
    for line in ethtool_k.splitlines():
        key, _, rest = line.strip().partition(":")
        if key in OFFLOADS and rest.strip():
            out[key] = rest.strip()
    return out


def _described(text: str) -> tuple[list[dict] | None, dict[str, dict[str, str]]]:
    """DESCRIBE's output: the qdiscs (None when tc gave no JSON) and, per interface, the offloads' on/off."""
    head, *parts = ("\n" + text).split("\n== ")
    try:
        qdiscs = json.loads(head)
    except ValueError:
        qdiscs = None
    offloads = {}
    for part in parts:
        dev, _, rest = part.partition("\n")
        offloads[dev.strip()] = {k: v.split()[0] for k, v in offload_states(rest).items()}
    return qdiscs, offloads
