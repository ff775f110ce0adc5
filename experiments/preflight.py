"""Preflight: what a spec needs from this machine, checked before anything is set up.

Each need is a feature, what in the spec needs it, whether this machine has it, and how to get it. `ccrig
preflight SPEC` prints them all; `ccrig run` refuses to start while any is missing (exit code 2).
"""
from __future__ import annotations

import os
import platform
import shutil
from dataclasses import dataclass

from .commands import Commands
from .errors import InputError
from .spec import Point

TOOLS = {"ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "iperf3": "iperf3", "ethtool": "ethtool"}


@dataclass
class Need:
    feature: str
    needed_by: str
    ok: bool
    how: str = ""

    def problem(self) -> str:
        return f"{self.feature} (needed by {self.needed_by}) is missing: {self.how}"


def needs(points: list[Point], commands: Commands, prefix: str) -> list[Need]:
    out: list[Need] = []
    release = platform.release()
    out.append(Need("root privileges", "network namespaces, tc and iperf3 in namespaces", os.geteuid() == 0,
                    "run as root, e.g. `sudo ccrig run SPEC` (or `sudo make experiment`)"))
    for tool, pkg in TOOLS.items():
        out.append(Need(f"the `{tool}` command", "every run", shutil.which(tool) is not None,
                        f"install the Debian package {pkg} (`make deps`)"))
    # queue disciplines, netem included, that any point's links ask for
    kinds: dict[str, str] = {}
    for p in points:
        topo = p.experiment.topology.build(p.experiment.n_flows)
        for link in topo.links:
            for (a, b), eg in (((link.a, link.b), link.a_to_b), ((link.b, link.a), link.b_to_a)):
                if eg.qdisc is not None and eg.rate is not None:
                    kinds.setdefault(eg.qdisc.kind, f"the {a}->{b} link's qdisc")
                if eg.needs_netem:
                    what = "added delay" if eg.delay > 0 else "random loss"
                    kinds.setdefault("netem", f"{what} on the {a}->{b} link")
    # every link's tc argv is rendered now, so a discipline whose parameters do not fit its link (a RED
    # threshold beyond the buffer) is refused before anything is set up
    from topologies.links import egress_argv
    for p in points:
        topo = p.experiment.topology.build(p.experiment.n_flows)
        sources = [topo.address(s) for s, _ in topo.pairs] or None
        for lst in topo.interfaces().values():
            for x in lst:
                try:
                    egress_argv(x.name, x.egress, topo.mtu, max(1, len(topo.pairs)), sources)
                except ValueError as e:
                    raise InputError(f"topology ({x.node}->{x.peer} link): {e}") from None
    # on the hosts testbed the kernels that matter are the hosts': their laws are checked on each host before
    # anything is loaded (tcp_modules.manager.CcSet), their tools when the testbed connects
    local = points[0].experiment.testbed != "hosts"
    if local and kinds and os.geteuid() == 0 and shutil.which("tc"):
        from qdiscs import probe
        have = probe.available(commands, prefix)
        for kind, by in kinds.items():
            out.append(Need(f"the {kind} queue discipline", by, kind in have,
                            probe.missing_message(kind, release)))
    if local:
        from tcp_modules.manager import CcManager
        ccs = [f.cc for p in points for f in p.experiment.flows]
        problems = CcManager(commands, prefix, points[0].experiment.cc_form).preflight(ccs)
        out += [Need("TCP congestion control", "flows[].cc", False, why) for why in problems]
    from .pause_run import needs as pause_needs
    out += pause_needs(points, commands, prefix)
    # one line per distinct need
    seen, unique = set(), []
    for n in out:
        if (n.feature, n.ok, n.how) not in seen:
            seen.add((n.feature, n.ok, n.how))
            unique.append(n)
    return unique
