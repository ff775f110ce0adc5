"""What a hosts run changed on each host, kept as the commands that put it back.

up() records each change before it makes it: the settings it found (a port's sizes, offloads and state, the
router's forwarding), the routes it is about to add, and the undo commands other parts of the run hand in
(remember: a NIC's PAUSE setting). One list serves down() and the host's undo.sh in the run's directory there,
which `ccrig clean -i` runs (as root, every line whatever the others do) when the run died unrestored.
"""
from __future__ import annotations

import shlex

from ...testbed import OFFLOADS, offload_states

UNDO_SCRIPT = "undo.sh"  # in a run's directory on each host: what clean -i runs if the run died unrestored


def run_dir(prefix: str, host: str) -> str:
    """A run's directory on a host (its pid files, staged files and undo.sh): per host, so hosts sharing a
    filesystem (or the one-machine test bed) never collide."""
    return f"/tmp/{prefix}-{host}"


def offloads(ethtool_k: str) -> dict[str, bool]:
    """The on/off state of the offloads up() turns off, from `ethtool -k` output (fixed ones are left alone)."""
    return {k: v.startswith("on") for k, v in offload_states(ethtool_k).items() if "[fixed]" not in v}


class UndoJournal:
    """Per node, the commands that undo what the run changed on its host, newest change undone first."""

    def __init__(self):
        self._remembered: dict[str, list[list[str]]] = {}  # node -> remember()'s commands
        self._routes: dict[str, list[list[str]]] = {}
        self._ports: dict[str, list[tuple[str, str, dict]]] = {}  # node -> (dev, address/prefix, settings)
        self._forwarding: dict[str, str] = {}                     # router node -> ip_forward before up()

    def remember(self, node: str, argv: list[str]) -> None:
        """A command that undoes a change its caller made on node's host and restores itself (a NIC's PAUSE
        setting): for undo.sh only, down() leaves it to its owner."""
        self._remembered.setdefault(node, []).append(list(argv))

    def routes(self, node: str, routes: list[tuple[str, str]]) -> None:
        """The (subnet, via) routes up() is about to add on node's host."""
        self._routes[node] = [["ip", "route", "del", subnet, "via", via] for subnet, via in routes]

    def port(self, node: str, dev: str, address: str, before: dict) -> None:
        """An interface up() is about to prepare and give address (with its /prefix), and its settings before:
        mtu, gso_max_segs, gso_max_size, gro_max_size, features (ethtool -k name -> on), up. An interface never
        recorded (mapped, but up() failed before it) keeps its own root qdisc and addresses: not ours."""
        self._ports.setdefault(node, []).append((dev, address, dict(before)))

    def forwarding(self, node: str, before: str) -> None:
        """net.ipv4.ip_forward on node's host before up() turned it on."""
        self._forwarding[node] = before

    def commands(self, node: str, remembered: bool = True) -> list[list[str]]:
        """The commands that put node's host back as it was before up(): what callers asked to remember (newest
        first; remembered=False leaves them out, as down() does: their owners restore those), the routes,
        each prepared port's qdisc, address, sizes, offloads and state, and forwarding."""
        out = list(reversed(self._remembered.get(node, []))) if remembered else []
        out += self._routes.get(node, [])
        for dev, address, s in self._ports.get(node, []):
            out.append(["tc", "qdisc", "del", "dev", dev, "root"])
            out.append(["ip", "addr", "del", address, "dev", dev])
            args = []
            for k in ("gso_max_segs", "gso_max_size", "gro_max_size"):
                if s.get(k) is not None:
                    args += [k, str(s[k])]
            if s.get("mtu"):
                args += ["mtu", str(s["mtu"])]
            if args:
                out.append(["ip", "link", "set", "dev", dev, *args])
            kargs = [w for k, v in s.get("features", {}).items() for w in (OFFLOADS[k], "on" if v else "off")]
            if kargs:
                out.append(["ethtool", "-K", dev, *kargs])
            if not s.get("up", True):
                out.append(["ip", "link", "set", "dev", dev, "down"])
        if node in self._forwarding:
            out.append(["sysctl", "-q", "-w", f"net.ipv4.ip_forward={self._forwarding[node]}"])
        return out

    def script(self, node: str, run: str) -> str:
        """UNDO_SCRIPT for node's host: a shell script, one command per line."""
        lines = [f"# ccrig: undoes run {run}'s changes to this host (node {node}); run by ccrig clean -i"]
        lines += [shlex.join(argv) for argv in self.commands(node)]
        return "\n".join(lines) + "\n"

    def clear(self) -> None:
        for d in (self._remembered, self._routes, self._ports, self._forwarding):
            d.clear()
