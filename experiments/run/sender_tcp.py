"""Per-sender TCP behaviour: a flow's `tcp:` settings and `max_window`, applied where Linux keeps them.

    flows:
      - {cc: reno, tcp: {sack: false, recovery: none, frto: false}, max_window: 5}

Linux has one TCP with knobs. Some are per network namespace (each namespace has its own TCP sysctls), so they
apply to every flow of the flow's sender node; the others are per route, so they apply to every flow of its
sender -> receiver pair (a host route to the receiver, added on the sender, or for quickack on the receiver):

    sack, dsack, frto, ecn      net.ipv4.tcp_sack / tcp_dsack / tcp_frto / tcp_ecn on the sender
    recovery: rack | none       net.ipv4.tcp_recovery = 1 | 0 on the sender (RACK loss detection on or off)
    tlp: false                  net.ipv4.tcp_early_retrans = 0 on the sender (no tail loss probe; true: 3, the default)
    reordering: N               net.ipv4.tcp_reordering = N on the sender: the duplicate (or SACKed) segments that
                                start a fast retransmit without RACK (more than a window's: the timer recovers)
    initcwnd, rto_min           `ip route replace RECEIVER/32 via GW initcwnd N rto_min T` on the sender
    max_window: N               the same route with `cwnd lock N`: the kernel clamps cwnd to N (snd_cwnd_clamp)
    quickack: true              `ip route replace SENDER/32 via GW quickack 1` on the receiver: no delayed ACKs
    buffer: 64mb                the most autotuning may grow a socket's buffers to: net.ipv4.tcp_wmem and tcp_rmem's
                                maximum on the sender, tcp_rmem's on the receiver (Linux's 4 MB send and 6 MB
                                receive maxima cap one flow near 300 Mbit/s at 100 ms RTT, whatever the link)

Two flows that share a node (or a pair) must agree, else the spec is refused. Every change is recorded (env.json's
`sender_tcp`, the value before and after) and, on hosts, undone (Testbed.remember_undo), as the namespaces'
own end undoes it on netns and vm.
"""
from __future__ import annotations

import subprocess
import sys
import threading
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ccrig import fanout, jsondoc
from ccrig.commands import batch_text
from ccrig.errors import InputError, RunError
from ccrig.fields import SizeField, TimeField
from ccrig.topologies.testbed import Testbed
from ccrig.experiments import nodes

# the most a researcher asks of initcwnd (RFC 6928 argues for 10; a datacentre may try 100s)
MAX_INITCWND = 1000


class TcpSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sack: bool | None = None
    dsack: bool | None = None
    recovery: Literal["rack", "none"] | None = None
    frto: bool | None = None
    tlp: bool | None = None
    # Linux's tcp_max_reordering (300) bounds what reordering may reach, and so what is accepted here
    reordering: int | None = Field(None, ge=1, le=300)
    ecn: bool | None = None
    initcwnd: int | None = Field(None, ge=1, le=MAX_INITCWND)
    rto_min: TimeField | None = None
    quickack: bool | None = None
    buffer: SizeField | None = None

    def buffer_sysctls(self, sender: bool) -> dict[str, str]:
        """tcp_rmem (and on the sender tcp_wmem) with `buffer` as the maximum, Linux's minimum and default kept."""
        if self.buffer is None:
            return {}
        most = str(self.buffer.bytes if self.buffer.bytes is not None else self.buffer.packets * 1514)
        out = {"net.ipv4.tcp_rmem": f"4096 131072 {most}"}
        if sender:
            out["net.ipv4.tcp_wmem"] = f"4096 16384 {most}"
        return out

    def sysctls(self) -> dict[str, str]:
        """The sender namespace's sysctls these settings ask for."""
        out = self.buffer_sysctls(sender=True)
        for name, key in (("sack", "tcp_sack"), ("dsack", "tcp_dsack"), ("ecn", "tcp_ecn")):
            v = getattr(self, name)
            if v is not None:
                out[f"net.ipv4.{key}"] = "1" if v else "0"
        if self.frto is not None:
            out["net.ipv4.tcp_frto"] = "2" if self.frto else "0"   # 2: the kernel's default, RFC 5682's F-RTO
        if self.recovery is not None:
            out["net.ipv4.tcp_recovery"] = "1" if self.recovery == "rack" else "0"
        if self.tlp is not None:
            out["net.ipv4.tcp_early_retrans"] = "3" if self.tlp else "0"   # 3: the kernel's default, TLP on
        if self.reordering is not None:
            out["net.ipv4.tcp_reordering"] = str(self.reordering)
        return out


def route_options(tcp: TcpSettings | None, max_window: int | None) -> list[str]:
    """The sender's route options toward the receiver."""
    out = []
    if tcp is not None and tcp.initcwnd is not None:
        out += ["initcwnd", str(tcp.initcwnd)]
    if tcp is not None and tcp.rto_min is not None:
        out += ["rto_min", f"{max(1, round(tcp.rto_min * 1e3))}ms"]
    if max_window is not None:
        out += ["cwnd", "lock", str(max_window)]
    return out


class SenderTcp:
    """The settings of a repetition's flows: planned (and checked) from the spec's flows placed on their pairs,
    applied once the testbed is up, recorded for env.json."""

    def __init__(self, testbed: Testbed, placed: list[tuple[int, object, str, str]]):
        """placed: (flow index, the spec's Flow, sender node, receiver node) for every flow."""
        self.testbed = testbed
        self.sysctls: dict[str, dict[str, str]] = {}            # node -> sysctl -> value
        self.routes: dict[tuple[str, str], list[str]] = {}      # (node, destination node) -> route options
        by_node: dict[str, int] = {}
        by_pair: dict[tuple[str, str], int] = {}
        for i, f, snd, rcv in placed:
            tcp = getattr(f, "tcp", None)
            want = tcp.sysctls() if tcp is not None else {}
            self._agree(self.sysctls, snd, want, by_node, i, "tcp", f"sender {snd}")
            opts = route_options(tcp, getattr(f, "max_window", None))
            self._agree(self.routes, (snd, rcv), opts, by_pair, i, "tcp", f"pair {snd} -> {rcv}")
            if tcp is not None and tcp.buffer is not None:
                self._agree(self.sysctls, rcv, tcp.buffer_sysctls(sender=False), by_node, i, "tcp.buffer",
                            f"receiver {rcv}")
            if tcp is not None and tcp.quickack:
                self._agree(self.routes, (rcv, snd), ["quickack", "1"], by_pair, i, "tcp.quickack",
                            f"pair {rcv} -> {snd}")
        self.record: dict = {}
        # (node, argv) that undo what apply() did, in order; restore() runs them backwards (on hosts the testbed
        # leaves remembered commands to their owner; in a namespace they cost a few commands before it goes)
        self.undo: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()

    @staticmethod
    def _agree(table: dict, key, want, first: dict, i: int, field: str, what: str) -> None:
        if not want:
            return
        if key in table and table[key] != want:
            raise InputError(f"flows: flow {i}'s {field} ({want}) differs from flow {first[key]}'s ({table[key]}) "
                             f"on {what}; these settings are per node or per route, so flows sharing it must agree")
        table.setdefault(key, want)
        first.setdefault(key, i)

    def describe_plan(self) -> list[str]:
        """What apply() will run, for preflight."""
        lines = [f"{node}: sysctl -w {k}={v}" for node, kv in self.sysctls.items() for k, v in kv.items()]
        lines += [f"{node}: ip route replace {dst}/32 via <next hop> {' '.join(opts)}"
                  for (node, dst), opts in self.routes.items()]
        return lines

    def apply(self) -> dict:
        """Sets everything; returns the record for env.json: per node the sysctls (before -> after) and routes.
        The nodes' routes side by side (ccrig.fanout: each node its own); the sysctls one after another
        (two nodes on one host share them, and restore() undoes them in the order they were set)."""
        tb = self.testbed

        def pin_routes(node: str) -> list[dict]:
            # a node's routes in three commands however many (one `ip` process per route and step cost a TCG
            # guest 3.7 s of a Keshav pair's set-up): where each destination goes now, the /32 routes, the table
            dsts = [(dst, opts) for (n, dst), opts in self.routes.items() if n == node]
            addrs = [tb.address(dst) for dst, _ in dsts]
            out = tb.run(node, ["ip", "-j", "-batch", "-"], input=batch_text([["route", "get", a] for a in addrs]))
            got = jsondoc.values(out.stdout)
            if len(got) != len(addrs):
                raise RunError(f"{tb.where(node)}: ip -j -batch printed {len(got)} route(s) for {len(addrs)} lookups")
            argvs = [["ip", "route", "replace", f"{a}/32", *(["via", g["gateway"]] if "gateway" in g else []),
                      "dev", g["dev"], *opts] for a, g, (_, opts) in zip(addrs, got, dsts)]
            for a in addrs:
                self._remember(node, ["ip", "route", "del", f"{a}/32"], inside=True)
            tb.run(node, ["ip", "-batch", "-"], input=batch_text([argv[1:] for argv in argvs]))
            table = tb.run(node, ["ip", "route", "show"]).stdout.splitlines()
            return [{"to": dst, "argv": argv, "kernel": next((line.strip() for line in table
                                                               if line.split(" ", 1)[0] == a), "")}
                    for (dst, _), a, argv in zip(dsts, addrs, argvs)]

        def entry(node):
            return self.record.setdefault(node, {"where": tb.where(node), "sysctls": {}, "routes": []})
        # a node's keys in one sysctl each to read, set and read back (one process per key and step cost a TCG
        # guest about a second each: 64 of them in Keshav's scenario 1 with the Generic source's knobs)
        for node, kv in self.sysctls.items():
            keys = list(kv)
            before = self._values(node, keys)
            self._remember(node, ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in zip(keys, before))])
            tb.run(node, ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in kv.items())])
            for key, was, now in zip(keys, before, self._values(node, keys)):
                entry(node)["sysctls"][key] = {"before": was, "after": now}
        route_nodes = list(dict.fromkeys(node for node, _ in self.routes))
        for node, routes in zip(route_nodes, fanout.each(pin_routes, route_nodes)):
            entry(node)["routes"] += routes
        locked = [key for key, opts in self.routes.items() if "cwnd" in opts]
        metrics = self._warm(locked)
        for (node, dst) in locked:
            next(r for r in self.record[node]["routes"] if r["to"] == dst)["tcp_metrics"] = metrics[(node, dst)]
        return self.record

    def _values(self, node: str, keys: list[str]) -> list[str]:
        """The keys' values on node, in order (sysctl -n prints one a line)."""
        lines = self.testbed.run(node, ["sysctl", "-n", *keys]).stdout.rstrip("\n").split("\n")
        if len(lines) != len(keys):
            raise RunError(f"{node}: sysctl -n {' '.join(keys)} printed {len(lines)} line(s) for {len(keys)} keys")
        return [line.strip() for line in lines]

    def _remember(self, node: str, argv: list[str], inside: bool = False) -> None:
        """Notes argv as undoing a change on node; inside: a change that lives in the node's own namespace (a
        route), which a testbed that removes its nodes on down() (down_removes_nodes) need not undo."""
        self.testbed.remember_undo(node, argv)
        if inside and self.testbed.down_removes_nodes:
            return
        with self._lock:   # apply() sets nodes side by side
            self.undo.append((node, argv))

    def restore(self) -> None:
        """Undoes apply(), backwards, one change after another (two nodes on one host share its sysctls: only this
        order restores what was there); best effort, never raises (the testbed may be half gone)."""
        while self.undo:
            node, argv = self.undo.pop()
            try:
                self.testbed.run(node, argv, check=False, timeout=20)
            except Exception:
                pass

    def _warm(self, routes: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """A route's locked cwnd reaches a connection only through the kernel's TCP metrics cache
        (tcp_init_metrics clamps snd_cwnd_clamp from an existing entry, and an entry is made when a connection
        that measured an RTT closes), so one short connection node -> dst makes that entry before the flows
        start. Returns the cache's line for each dst (`ip tcp_metrics show`). Where every node is a namespace of
        this machine, one process makes all the connections (experiments/nodes/warm.py: a Python start costs
        seconds in a TCG guest, and two per route took 30 s of an 8-pair run there)."""
        tb = self.testbed
        paths = {n: tb.netns_path(n) for route in routes for n in route}
        if routes and all(paths.values()):
            argv = [sys.executable, "-S", str(nodes.WARM), str(WARM_PORT),
                    *(f"{paths[n]},{paths[d]},{tb.address(d)}" for n, d in routes)]
            p = tb.commands.run(argv, check=False, timeout=WARM_TIMEOUT)
            if p.returncode != 0:
                raise RunError(f"the warm-up connections (which carry the routes' locked cwnd to the flows) failed "
                               f"(exit status {p.returncode}): {p.stderr.strip()[-300:] or 'no output'}")
        else:
            self._warm_each(routes)
        shown = fanout.each(lambda r: tb.run(r[0], ["ip", "tcp_metrics", "show", tb.address(r[1])],
                                             check=False).stdout.strip(), routes)
        return dict(zip(routes, shown))

    def _warm_each(self, routes: list[tuple[str, str]]) -> None:
        """_warm where the nodes are not all this machine's namespaces: two programs per route, each on its node,
        all at once (one after another they took 2.5 s per sender in a TCG guest), in rounds where two senders
        share a receiver, whose listener takes one connection."""
        rounds: list[list[tuple[str, str]]] = []
        for node, dst in routes:
            free = next((r for r in rounds if all(d != dst for _, d in r)), None)
            if free is None:
                rounds.append(free := [])
            free.append((node, dst))
        tb = self.testbed
        for r in rounds:
            listeners = [tb.popen(dst, [*tb.python(dst), "-c", WARM_SERVER, tb.address(dst), str(WARM_PORT)])
                         for _, dst in r]
            clients = []
            try:
                clients += [tb.popen(node, [*tb.python(node), "-c", WARM_CLIENT, tb.address(dst), str(WARM_PORT)])
                           for node, dst in r]
                for (node, dst), c in zip(r, clients):
                    # a bound for a failure only: a TCG guest on a busy host took over 30 s to start these Pythons
                    try:
                        status = c.wait(timeout=WARM_TIMEOUT)
                    except subprocess.TimeoutExpired:
                        status = f"none after {WARM_TIMEOUT} s"
                    if status != 0:
                        raise RunError(f"{tb.where(node)}: the warm-up connection to {dst} (which carries the route's "
                                       f"locked cwnd to the flows) failed (exit status {status})")
                for listen in listeners:
                    listen.wait(timeout=WARM_TIMEOUT)
            finally:
                for proc in listeners + clients:
                    if proc.poll() is None:
                        proc.kill()


# how long a warm-up connection's programs may take, start-up included
WARM_TIMEOUT = 120
# the warm-up connection's port on the receiver (below the flows' 5201 + i)
WARM_PORT = 5200
WARM_SERVER = ("import socket, sys\n"
               "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
               "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); s.settimeout(110)\n"
               "c, _ = s.accept(); c.recv(1); c.close()\n")
# the sender closes first: its socket passes through TIME_WAIT, where the kernel saves the metrics entry
WARM_CLIENT = ("import socket, sys, time\n"
               "c, deadline = None, time.monotonic() + 100\n"
               "while c is None and time.monotonic() < deadline:   # until the listener's Python has started\n"
               "    try:\n"
               "        c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)\n"
               "    except OSError:\n"
               "        time.sleep(0.05)\n"
               "c.close(); time.sleep(0.2)\n")
