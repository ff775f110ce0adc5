"""Delay lines on the netns testbed: each delayed link a - b becomes a - [line namespace] - b.

    a's ethN ── eth0 [<prefix>-line<i>] eth1 ── b's ethM

The line namespace has no addresses and no IPv6 (nothing of its own crosses the link); the two ends keep their
names, addresses and MACs, and see each other as neighbours exactly as over one veth pair. A delayed direction is a
delayline process (eth0 -> eth1 for a -> b); an undelayed one is a u32 match-all filter on the ingress with a mirred
redirect to the other veth, in the kernel. The end that feeds a delayed direction always sends wire-sized frames (a
super-packet would not fit a slot), with or without topology.gso; the line's own veths have every offload off.
Each process's counters go to /tmp/<namespace>.delayline/, removed by stop() or by `ccrig clean` with the namespace.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ccrig.commands import Commands, batch_text, in_netns
from ccrig.errors import RunError
from ccrig.procs import stop_group, wait_for_line
from . import Line, build, slot_bytes, slots_for, summarise

READY_TIMEOUT_S = 20.0


def stats_dir(ns: str) -> Path:
    return Path("/tmp") / f"{ns}.delayline"


def link_lines(line: Line, ns_a: str, if_a: str, ns_b: str, if_b: str, ns_line: str, mtu: int,
               sized: list[str], wire: list[str]) -> list[list[str]]:
    """`ip -batch` lines for the two veth pairs that stand for the link: an end that feeds a delay sends wire-sized
    frames, the other keeps the topology's sizing (`sized`)."""
    size_a = wire if line.a_to_b > 0 else sized
    size_b = wire if line.b_to_a > 0 else sized
    m = ["mtu", str(mtu)]
    return [["link", "add", if_a, "netns", ns_a, *m, *size_a, "type", "veth", "peer", "name", "eth0",
             "netns", ns_line, *m, *wire],
            ["link", "add", "eth1", "netns", ns_line, *m, *wire, "type", "veth", "peer", "name", if_b,
             "netns", ns_b, *m, *size_b]]


def setup_steps(line: Line, ns_line: str, enter: list[str]) -> list[tuple[list[str], str | None]]:
    """The line namespace's settings (Commands.script steps): no IPv6, links up, offloads off, and the kernel's
    redirect for each undelayed direction."""
    steps: list[tuple[list[str], str | None]] = [
        ([*enter, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"],
         None),
        (in_netns(ns_line, ["ip", "-batch", "-"]),
         batch_text([["link", "set", d, "up"] for d in ("lo", "eth0", "eth1")]))]
    for dev in ("eth0", "eth1"):
        steps.append(([*enter, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"], None))
    tc = []
    for src, dst, delay in (("eth0", "eth1", line.a_to_b), ("eth1", "eth0", line.b_to_a)):
        if delay <= 0:
            tc += [["qdisc", "add", "dev", src, "ingress"],
                   ["filter", "add", "dev", src, "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0",
                    "0", "action", "mirred", "egress", "redirect", "dev", dst]]
    if tc:
        steps.append((in_netns(ns_line, ["tc", "-batch", "-"]), batch_text(tc)))
    return steps


class LineProcesses:
    """The delayline processes of one testbed, started after its links are up and stopped before they go."""

    def __init__(self, commands: Commands, lines: list[Line], ns_of_line, topology):
        self.commands, self.lines, self.ns_of_line, self.topology = commands, lines, ns_of_line, topology
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []

    def start(self) -> None:
        exe = build(self.commands)
        for line in self.lines:
            ns = self.ns_of_line(line)
            d = stats_dir(ns)
            d.mkdir(parents=True, exist_ok=True)
            for src, dst, delay in line.directions():
                into, out = ("eth0", "eth1") if src == line.a else ("eth1", "eth0")
                path = d / f"{src}-{dst}.json"
                argv = [str(exe), into, out, str(round(delay * 1e9)), str(slots_for(delay, self.topology)),
                        str(slot_bytes(self.topology.mtu)), str(path)]
                proc = self.commands.popen(argv, ns=ns, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                self.procs.append((f"{src}->{dst}", proc, path))
                said = wait_for_line(proc, proc.stdout, "ready", READY_TIMEOUT_S)
                if said != "ready":
                    err = proc.stderr.read().decode(errors="replace").strip() if proc.poll() is not None else ""
                    raise RunError(f"the delay line of {src}->{dst} (namespace {ns}) did not start: "
                                   f"{err or said or 'no message'}")

    def pids(self) -> list[int]:
        return [p.pid for _, p, _ in self.procs if p.poll() is None]

    def stop(self) -> dict[str, dict]:
        """Stops every process (each writes its final counters) and returns them per direction, summarised; removes
        the counters' folders. Best effort: a process that died says so instead of its figures."""
        out = {}
        for name, proc, path in self.procs:
            stop_group(proc)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            try:
                out[name] = summarise(json.loads(path.read_text()))
            except (OSError, ValueError):
                out[name] = {"error": f"no counters (the process ended with status {proc.returncode})"}
            if proc.returncode not in (0, None):
                out[name]["exit_status"] = proc.returncode
        self.procs = []
        for line in self.lines:
            shutil.rmtree(stats_dir(self.ns_of_line(line)), ignore_errors=True)
        return out
