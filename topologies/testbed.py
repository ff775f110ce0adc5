"""What a testbed is: something that realises a Topology and runs commands on its nodes.

The runner only ever talks to this interface, so it never cares which testbed it has (netns, mininet,
hosts, vm). Like Mininet's Node, a testbed runs argv lists "on a node"; the argv is logged by Commands.
"""
from __future__ import annotations

import signal
import subprocess
import sys
from abc import ABC, abstractmethod
from pathlib import Path

from ccrig.commands import Commands
from .topology import Topology


class Testbed(ABC):
    name = "abstract"
    # popen() returns the process itself, so a signal sent to its pid reaches the command (not so when it is a
    # local ssh client standing for a remote one): the workloads may start senders early and signal them to go
    signals_reach_popen = False

    def __init__(self, topology: Topology, commands: Commands, prefix: str):
        self.topology = topology
        self.commands = commands
        # every name this testbed creates starts with prefix (e.g. "ccrig-4242"), so `ccrig clean` finds it
        self.prefix = prefix

    def preflight(self) -> list[str]:
        """What this machine lacks to realise the topology, each as a sentence saying how to get it."""
        return []

    @abstractmethod
    def up(self) -> None:
        """Creates nodes, links, addresses, routes and the links' tc (rate, discipline, buffer, delay)."""

    @abstractmethod
    def down(self) -> None:
        """Removes everything up() made. Idempotent and best effort: it never raises."""

    @abstractmethod
    def run(self, node: str, argv: list[str], check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Runs argv on node and waits."""

    @abstractmethod
    def popen(self, node: str, argv: list[str], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) -> subprocess.Popen:
        """Starts argv on node in the background (killing the Popen's process group stops it)."""

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

    def python(self, node: str) -> list[str]:
        """The argv prefix that runs a Python 3 interpreter on node (samplers run through it)."""
        return [sys.executable]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()
