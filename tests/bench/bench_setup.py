"""Setup time: a 30-sender dumbbell brought up and down on netns (NetnsTestbed), and on Mininet, by the mininet
testbed and by a plain Mininet script side by side (Linux bridge and Open vSwitch userspace datapath each).

Goals: netns up + down under 2 s; the mininet testbed's up + down within 1.5x plain Mininet's (`ratio`). The
testbeds' `up_profile` says which commands dominate (time and count per kind of command, from the commands log, in
which every command's line is written when it ends); the testbed's `up_phases_s` splits Mininet's build and
start from ccrig's own configuration.

The plain script is the network as a Mininet user writes it: senders on one switch behind r1, receivers on one
behind r2, a TCLink between the routers at the bottleneck rate, a default route on every host and one route
per router. It skips Mininet.init's fixLimits as the testbed does (host-wide sysctls,
topologies/testbeds/mininet/testbed.py).

Both sides do the work an experiment needs, so the comparison is of the same work:
* wire-sized packets (docs/architecture.md's GSO trap): the testbed sets gso_max_segs 1 / gso_max_size / gro_max_size and
  tso/gso/gro/tx off on every node interface and switch port; plain Mininet does none of it, so the plain
  script does it too, as a Mininet user would: one `cmd` per interface on its node (switch ports on their
  switch), after net.start();
* Open vSwitch's daemons run before and after both (the bench holds them): a Mininet user's OVS is a system
  service, while ccrig starts OVS for a run when nothing runs it and stops it after. That start and stop is
  timed on its own (`ovs_daemons_start_stop_s`), not in either side's set-up + teardown.
What stays different is the topology's shape, which is the point of the comparison: the testbed realises the
Topology (a /24 per link, every link through a switch of its own: 62 nodes, 61 switches, 122 veth pairs for 30
senders) where the plain script has two shared switches (63 veth pairs); and its bottleneck is htb + pfifo
(100 packets) where TCLink's is htb alone.

Run as root: `make bench BENCH=setup` -> results/bench/setup.json.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

SENDERS = 30
GOAL_S = 2.0
GOAL_MININET_RATIO = 1.5  # the mininet testbed's up + down against plain Mininet's


def _topology():
    from ccrig.topologies.named.dumbbell import DumbbellSpec
    spec = DumbbellSpec.model_validate({"bottleneck": {"rate": "10mbit", "buffer": "100pkt",
                                                       "qdisc": {"kind": "pfifo"}}})
    return spec.build(SENDERS)


def _kind(argv: list[str]) -> str:
    """A command's kind for the profile: its program and the words that say what it does (names, numbers,
    node wrappers and devices left out)."""
    for wrapper in (["ip", "netns", "exec"], ["nsenter"], ["mnexec"], ["env"]):
        if argv[:len(wrapper)] == wrapper:
            argv = argv[len(wrapper):]
            while argv and (argv[0].startswith("-") or "=" in argv[0] or argv[0].isdigit()
                            or argv[0].startswith("ccrig-")):
                argv = argv[1:]
    words = [w for w in argv if not re.search(r"\d|^eth|^lo$|^dev$|^-", w)]
    return " ".join(words[:3])


def _entries(log: Path):
    """The log's commands: (end time, argv, here-document lines); a batch's stdin is logged as a here-document
    (EOF), and a script's own batches inside it as nested ones (CCRIG_EOF)."""
    import shlex
    lines = log.read_text().splitlines()
    i = 0
    while i < len(lines):
        t, _status, cmd = lines[i].split(None, 2)
        body = []
        if cmd.endswith("<<'EOF'"):
            cmd = cmd[:-len("<<'EOF'")]
            i += 1
            while lines[i] != "EOF":
                body.append(lines[i])
                i += 1
        yield float(t), shlex.split(cmd), body
        i += 1


def _profile(log: Path) -> dict:
    """Time per logged command kind (a line is written when its command ends, so a command took the time since
    the previous line), and for batches and scripts, how many of their lines are of which kind."""
    import shlex
    per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    inside: dict[str, int] = defaultdict(int)
    last = 0.0
    for t, argv, body in _entries(log):
        per[_kind(argv)][0] += t - last
        per[_kind(argv)][1] += 1
        last = t
        prog = [w for w in argv if w in ("ip", "tc")][:1]
        for line in body:
            if line in ("set -e", "CCRIG_EOF"):
                continue
            words = shlex.split(line.split(" <<'CCRIG_EOF'")[0])
            if words and words[0] in ("mnexec", "nsenter", "ip", "tc", "sh", "sysctl", "ethtool", "env"):
                prog = [w for w in words if w in ("ip", "tc")][:1]
                inside[_kind(words)] += 1
            else:
                inside[_kind(prog + words)] += 1
    total = sum(v[0] for v in per.values())
    rows = sorted(per.items(), key=lambda kv: -kv[1][0])
    return {"commands": sum(v[1] for v in per.values()), "command_time_s": round(total, 3),
            "by_kind": [{"kind": k, "count": n, "time_s": round(s, 3), "share": round(s / total, 3) if total else 0}
                        for k, (s, n) in rows[:10]],
            "batched_lines_by_kind": dict(sorted(inside.items(), key=lambda kv: -kv[1])[:10])}


def _time_testbed(make, workdir: Path, name: str) -> dict:
    from ccrig.commands import Commands
    up_log, down_log = workdir / f"{name}-up.log", workdir / f"{name}-down.log"
    tb = make(Commands(up_log))
    t0 = time.monotonic()
    try:
        tb.up()
        t1 = time.monotonic()
    finally:
        t1b = time.monotonic()
        tb.commands = Commands(down_log)
        tb.down()
        t2 = time.monotonic()
    out = {"up_s": round(t1 - t0, 3), "down_s": round(t2 - t1b, 3), "total_s": round(t2 - t0, 3),
           "up_profile": _profile(up_log)}
    if getattr(tb, "timings", None):
        out["up_phases_s"] = {k: round(v, 3) for k, v in tb.timings.items()}
    if down_log.exists():
        out["down_profile"] = _profile(down_log)
    return out


def _plain_mininet(switch_kind: str) -> dict:
    """The same dumbbell as a Mininet user writes it, timed from Mininet() to stop()."""
    from mininet.link import TCLink
    from mininet.net import Mininet
    from mininet.node import Node
    from mininet.topo import Topo
    from ccrig.qdiscs.base import wire_bytes
    from ccrig.topologies.testbeds.mininet import switch_class

    tag = f"pb{os.getpid() % 100000}"

    class Router(Node):
        def config(self, **params):
            super().config(**params)
            self.cmd("sysctl -q -w net.ipv4.ip_forward=1")

    class Dumbbell(Topo):
        def build(self, n):
            r1 = self.addNode(f"{tag}r1", cls=Router, ip="10.1.0.1/16")
            r2 = self.addNode(f"{tag}r2", cls=Router, ip="10.2.0.1/16")
            w1, w2 = self.addSwitch(f"{tag}w1", dpid="1"), self.addSwitch(f"{tag}w2", dpid="2")
            self.addLink(r1, w1, intfName1="eth0", intfName2=f"{tag}w1-0")
            self.addLink(r2, w2, intfName1="eth0", intfName2=f"{tag}w2-0")
            self.addLink(r1, r2, cls=TCLink, intfName1="eth1", intfName2="eth1", params1={"ip": "10.9.0.1/24",
                         "bw": 10}, params2={"ip": "10.9.0.2/24"})
            for i in range(1, n + 1):
                s = self.addHost(f"{tag}s{i}", ip=f"10.1.1.{i}/16", defaultRoute="via 10.1.0.1")
                d = self.addHost(f"{tag}d{i}", ip=f"10.2.1.{i}/16", defaultRoute="via 10.2.0.1")
                self.addLink(s, w1, intfName1="eth0", intfName2=f"{tag}w1-{i}")
                self.addLink(d, w2, intfName1="eth0", intfName2=f"{tag}w2-{i}")

    Mininet.inited = True
    t0 = time.monotonic()
    net = Mininet(topo=Dumbbell(SENDERS), switch=switch_class(switch_kind), controller=None, autoSetMacs=False)
    try:
        net.start()
        net[f"{tag}r1"].cmd("ip route add 10.2.0.0/16 via 10.9.0.2")
        net[f"{tag}r2"].cmd("ip route add 10.1.0.0/16 via 10.9.0.1")
        # wire-sized packets on every interface, as the testbed has them (the module's docstring)
        wire = wire_bytes(1500)
        for node in net.hosts + net.switches:
            for intf in node.intfList():
                if intf.name != "lo":
                    node.cmd(f"ip link set dev {intf} gso_max_segs 1 gso_max_size {wire} gro_max_size {wire}; "
                             f"ethtool -K {intf} tso off gso off gro off tx off")
        t1 = time.monotonic()
    finally:
        t1b = time.monotonic()
        net.stop()
        t2 = time.monotonic()
    return {"up_s": round(t1 - t0, 3), "down_s": round(t2 - t1b, 3), "total_s": round(t2 - t0, 3)}


def run() -> dict:
    from ccrig.topologies.testbeds.mininet import MininetOptions, MininetTestbed
    from ccrig.topologies.testbeds.netns import NetnsTestbed

    topo = _topology()
    pid = os.getpid()
    result: dict = {"senders": SENDERS, "nodes": len(topo.nodes), "links": len(topo.links), "goal_netns_s": GOAL_S,
                    "load_average": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="ccrig-bench-") as d:
        work = Path(d)
        result["netns"] = _time_testbed(lambda c: NetnsTestbed(topo, c, f"ccrig-b{pid}"), work, "netns")
        result["netns"]["meets_goal"] = result["netns"]["total_s"] < GOAL_S
        result["mininet"] = {}
        for kind in ("lxbr", "ovs-user"):
            options = MininetOptions(switch=kind)  # the spec's `mininet:` section
            with _ovs_running(kind) as daemons:
                out = {"ccrig_testbed": _time_testbed(lambda c: MininetTestbed(topo, c, f"ccrig-b{pid}", options),
                                                      work, f"mininet-{kind}"),
                       "plain_mininet": _plain_mininet(kind)}
            out["ratio"] = round(out["ccrig_testbed"]["total_s"] / out["plain_mininet"]["total_s"], 2)
            out["meets_goal"] = out["ratio"] <= GOAL_MININET_RATIO
            out.update(daemons)
            result["mininet"][kind] = out
    return result


@contextmanager
def _ovs_running(kind: str):
    """Open vSwitch's daemons running for both sides (the module's docstring); yields what starting and stopping
    them took, when the bench started them."""
    from ccrig.commands import Commands
    from ccrig.topologies.testbeds.mininet import OvsDaemons
    out: dict = {}
    if kind == "lxbr":
        yield out
        return
    ovs, tag = OvsDaemons(Commands(None)), f"ccrig-bench{os.getpid()}"
    started = not ovs.running()
    t0 = time.monotonic()
    ovs.hold(tag)
    t_start = time.monotonic() - t0
    try:
        yield out
    finally:
        t0 = time.monotonic()
        ovs.release(tag)
        if started:
            out["ovs_daemons_start_stop_s"] = round(t_start + time.monotonic() - t0, 3)


if __name__ == "__main__":
    import json
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    print(json.dumps(run(), indent=2))
