"""Preflight: what a spec needs from this machine, checked before anything is set up.

Each need is a feature, what in the spec needs it, whether this machine has it, and how to get it. `ccrig
preflight SPEC` prints them all; `ccrig run` refuses to start while any is missing (exit code 2).
"""
from __future__ import annotations

import os
import platform
import shutil

from ccrig.commands import Commands
from ccrig.errors import InputError
from ccrig.needs import Need
from ccrig.qdiscs import probe
from ccrig.tcp_modules.manager import CcManager
from ccrig.topologies import testbeds
from ccrig.topologies.links import egress_argv
from ccrig.topologies.pause import chain_plan
from ccrig.experiments.run.pause_run import applies, needs as pause_needs, testbed_class
from ccrig.topologies.loss import program as loss_program
from ccrig.topologies import delayline
from ccrig.qdiscs import sojourn
from ccrig.experiments import events
from ccrig.experiments.events.conditions import LinkConditions
from ccrig.experiments.run.sender_tcp import SenderTcp
from ccrig.experiments.spec import Point

TOOLS = {"ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "iperf3": "iperf3", "ethtool": "ethtool"}


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
        bpf_loss = not loss_by_netem(p.experiment)
        # where a delay line makes the delay, its links need no netem for it
        built = delayline.plan(p.experiment.topology.build(p.experiment.n_flows),
                               delay_via(p.experiment, commands, prefix)[0] == "line")[0]
        for by_kind in qdisc_kinds(built, bpf_loss).values():
            for kind, by in by_kind.items():
                kinds.setdefault(kind, by)
    # every link's tc argv is rendered now, so a discipline whose parameters do not fit its link (a RED
    # threshold beyond the buffer) is refused before anything is set up
    for p in points:
        topo = p.experiment.topology.build(p.experiment.n_flows)
        sources = [topo.address(s) for s, _ in topo.pairs] or None
        for lst in topo.interfaces().values():
            for x in lst:
                try:
                    egress_argv(x.name, x.egress, topo.mtu, max(1, len(topo.pairs)), sources, topo.gso)
                except ValueError as e:
                    raise InputError(f"topology ({x.node}->{x.peer} link): {e}") from None
    bed = testbed_class(points[0].experiment)
    out += bed.needs(points[0].experiment)
    out += looking_inside(points, bed)
    # on a remote testbed the kernels that matter are the hosts': their laws are checked on each host before
    # anything is loaded (tcp_modules.manager.CcSet), their tools when the testbed connects; a testbed that runs
    # elsewhere (the vm) brings its own kernel, whose disciplines and laws the run's preflight in the guest checks
    # (this kernel's lack of netem said `ccrig preflight --set testbed=vm` could not run what the guest runs)
    local = not bed.remote and not bed.elsewhere
    if local and kinds and os.geteuid() == 0 and shutil.which("tc"):
        have = probe.available(commands, prefix)
        for kind, by in kinds.items():
            out.append(Need(f"the {kind} queue discipline", by, kind in have,
                            probe.missing_message(kind, release)))
    if local:
        ccs = [f.cc for p in points for f in p.experiment.flows]
        problems = CcManager(commands, prefix, points[0].experiment.cc_form).preflight(ccs)
        out += [Need("TCP congestion control", "flows[].cc", False, why) for why in problems]
    out += pause_needs(points, commands, prefix)
    out += link_conditions(points, commands, prefix)
    out += delay_needs(points, commands, prefix)
    out += _remote(points, commands, prefix)
    # one line per distinct need
    seen, unique = set(), []
    for n in out:
        if (n.feature, n.ok, n.how) not in seen:
            seen.add((n.feature, n.ok, n.how))
            unique.append(n)
    return unique


def auto_testbed(points: list[Point], prefix: str) -> tuple[str, str]:
    """What `testbed: auto` means here: the testbed of this machine when the running kernel has every feature the
    points need, else the one that brings a kernel of its own (topologies.testbeds.AUTO_*); and why."""
    missing = [n for n in needs(points, Commands(None), prefix) if not n.ok]
    if not missing:
        return testbeds.AUTO_HERE, "because this kernel has everything the spec needs"
    return testbeds.AUTO_ELSEWHERE, "because " + "; ".join(n.problem() for n in missing)


def netem_here(exp, commands: Commands, prefix: str) -> bool:
    """Whether the links' kernel has netem (added delay and delay events use it): this kernel's, probed; a
    remote testbed's hosts are probed for netem like any discipline (qdisc_kinds), and a testbed that runs
    elsewhere decides in its own kernel."""
    bed = testbed_class(exp)
    if bed.remote or bed.elsewhere or os.geteuid() != 0 or not shutil.which("tc"):
        return True
    return "netem" in probe.available(commands, prefix)


def loss_by_netem(exp) -> bool:
    """Whether the links' random loss is netem's (True) or the BPF program's (False, topologies/loss). Where
    this machine builds the links (netns, Mininet, the namespaces inside a vm guest) it is the program's, netem or
    not: the program spares the rig's own connections (iperf3's control, which netem would drop like data, so a
    PER 0.4 point never finished) and counts every drop. A remote testbed's hosts keep netem (probed like any
    discipline): the program's object would have to be on every host."""
    return testbed_class(exp).remote


def delay_via(exp, commands: Commands, prefix: str) -> tuple[str, str]:
    """How the spec's added delay is made, netem or line (topologies/delayline), and why: `delay.via` as given, or
    for auto netem where this kernel has it (a testbed that runs elsewhere or on other hosts: theirs), else the line."""
    via = exp.delay.via
    if via != "auto":
        return via, f"the spec asks for it (delay.via: {via})"
    bed = testbed_class(exp)
    if bed.remote or bed.elsewhere:
        return "netem", f"the {bed.kind} testbed's kernels make it (delay.via: auto)"
    if netem_here(exp, commands, prefix):
        return "netem", f"kernel {platform.release()} has sch_netem (delay.via: auto)"
    return "line", f"kernel {platform.release()} has no sch_netem (delay.via: auto)"


def delay_needs(points: list[Point], commands: Commands, prefix: str) -> list[Need]:
    """What makes each point's added delay and why; for the delay line, a testbed that has it, the compiler to
    build it, and no event that would change the delay (the line's is fixed for the run)."""
    out: list[Need] = []
    for p in points:
        exp = p.experiment
        if not delayline.has_delay(exp.topology.build(exp.n_flows)):
            continue
        via, why = delay_via(exp, commands, prefix)
        out.append(Need(f"added delay made by {'a delay line (topologies/delayline)' if via == 'line' else via}: "
                        f"{why}", "topology.rtt", True))
        if via != "line":
            continue
        bed = testbed_class(exp)
        if not bed.delay_lines:
            out.append(Need(f"a delay line on the {bed.kind} testbed", "topology.rtt", False,
                            f"kernel {platform.release()} has no sch_netem and the {bed.kind} testbed makes delay "
                            f"with netem alone: use testbed netns, or a kernel with sch_netem"))
        why_not = delayline.why_not()
        out.append(Need("the delay line's program (gcc)", "topology.rtt", not why_not, "; ".join(why_not)))
        if any(e.kind == "delay" for e in getattr(exp, "events", [])):
            out.append(Need("a delay event on a delay line", "events", False, "a delay change needs netem (the "
                            "line's delay is fixed for the run): use delay.via netem on a kernel with sch_netem"))
    return out


def qdisc_kinds(topo, bpf_loss: bool = False) -> dict[str, dict[str, str]]:
    """The queue disciplines, netem included, a topology's links ask for: transmitting node -> kind -> what
    needs it (the first link that does)."""
    out: dict[str, dict[str, str]] = {}
    for link in topo.links:
        for (a, b), eg in (((link.a, link.b), link.a_to_b), ((link.b, link.a), link.b_to_a)):
            if eg.qdisc is not None and eg.rate is not None:
                out.setdefault(a, {}).setdefault(eg.qdisc.kind, f"the {a}->{b} link's qdisc")
            # random loss alone needs no netem where the BPF program stands in for it
            if eg.delay > 0 or (eg.needs_netem and not bpf_loss):
                what = "added delay" if eg.delay > 0 else "random loss"
                out.setdefault(a, {}).setdefault("netem", f"{what} on the {a}->{b} link")
    return out


def looking_inside(points: list[Point], bed) -> list[Need]:
    """The capture (tcpdump) and the queue monitor (BPF on the qdisc tracepoints, this kernel's): on this machine's
    testbeds only, a testbed that runs elsewhere checking its own kernel there."""
    exp = points[0].experiment
    out: list[Need] = []
    if exp.queue_monitor and bed.remote:   # tcpdump is among the tools the hosts testbed checks on every host
        out.append(Need(f"queue_monitor on the {bed.kind} testbed", "queue_monitor", False, "not on a remote "
                        "testbed yet: run the spec on " + ", ".join(k for k, c in testbeds.available().items()
                                                                    if not c.remote) + ", or without `queue_monitor`"))
    if exp.capture is not None and not bed.elsewhere and not bed.remote:
        out.append(Need("the `tcpdump` command", "capture", shutil.which("tcpdump") is not None,
                        "install the Debian package tcpdump (`make deps`)"))
    if exp.queue_monitor and not bed.remote and not bed.elsewhere:
        out.append(sojourn.need())
    return out


def link_conditions(points: list[Point], commands: Commands, prefix: str) -> list[Need]:
    """How each link's random loss is realised (netem, or the BPF program with
    its tc argv and object), each link event on its schedule (refused by name where this testbed cannot do it),
    and the senders' TCP settings (sysctls and route options; flows sharing a node or route must agree)."""
    out: list[Need] = []
    for p in points:
        exp = p.experiment
        topo = exp.topology.build(exp.n_flows)
        netem = netem_here(exp, commands, prefix)
        cond = LinkConditions(exp, topo, netem, loss_by_netem(exp))
        where = f"point {p.index}" if len(points) > 1 else "the spec"
        for i, why in enumerate(events.problems(cond.events, topo, netem, exp.duration)):
            out.append(Need("a link event this testbed can make", where, False, why))
        if cond.points:
            why = loss_program.why_not()
            out.append(Need(f"the loss BPF program ({loss_program.OBJECT})", "random loss without netem and "
                            "link events (down, loss)", not why, "; ".join(why)))
        for d in cond.points:
            dev = topo.egress_of(d.node, d.peer).name if d.hook == "egress" else topo.egress_of(d.peer, d.node).name
            argv = " ; ".join(" ".join(a) for a in loss_program.attach_argv(dev, str(loss_program.OBJECT),
                                                                            d.hook))
            out.append(Need(f"{d.name} on {d.at}: {argv}" + (f" (loss {d.loss})" if d.loss else ""),
                            "BPF drop point", True))
        for line in events.render(cond.events, exp.duration):
            out.append(Need(f"link event {line.strip()}", "events", True))
        pairs = exp.flow_pairs(topo)
        plan = SenderTcp(None, [(i, f, *pairs[i]) for i, f in enumerate(exp.flow_list())])
        out += [Need(line, "flows[].tcp / max_window", True) for line in plan.describe_plan()]
    return out


def _remote(points: list[Point], commands: Commands, prefix: str) -> list[Need]:
    """On a remote testbed the kernels and NICs that matter are its machines', checked now over SSH: the
    testbed's own preflight connects (reachable, root, interfaces, tools); each host that transmits into a
    link with a queue discipline has its kernel probed for it (in a scratch namespace there, as here); a
    pause_chain's PAUSE plan is made (link B's NICs checked; tbf on node 1's host for the controller). Then
    the connections close: nothing was changed on any host, and the run's testbed opens its own."""
    out, done = [], set()
    for p in points:
        exp = p.experiment
        bed_class = testbed_class(exp)
        if not bed_class.remote:
            continue
        topo = exp.topology.build(exp.n_flows)
        wanted = qdisc_kinds(topo)   # node -> kind -> what needs it
        pause = exp.topology.pause.mode if applies(exp) else None
        key = (repr(sorted((n, sorted(k)) for n, k in wanted.items())), pause)
        if key in done:
            continue
        done.add(key)
        bed = bed_class(topo, commands, f"{prefix}-pre")
        try:
            problems = bed.preflight()
            if problems:
                out.append(Need(f"the {exp.testbed} testbed", f"testbed: {exp.testbed}", False, "; ".join(problems)))
                break
            if pause is not None:
                (n1, _), (n2, _) = exp.topology.pause_nodes(topo)
                if not (bed.owned(n1) and bed.owned(n2)):
                    raise InputError(f"topology.pause: got mode {pause!r} with ccrig_bottleneck switch; expected "
                                     f"router hosts as the pause_chain's {n1} and {n2} (ccrig_bottleneck: router): "
                                     f"a hardware switch's flow control is the lab's configuration, not ccrig's")
                if chain_plan(exp.topology, topo, bed, commands).actuator == "tbf":
                    wanted.setdefault(n1, {}).setdefault("tbf", "topology.pause (the XOFF/XON controller shapes "
                                                                "link B)")
            for node, kinds in wanted.items():
                if not bed.owned(node):
                    continue   # the hardware switch: its queues are the lab's
                release, have = probe.available_on(bed, node, f"{prefix}-pre", kinds)
                host = bed.machine(node)
                for kind, by in kinds.items():
                    out.append(Need(f"the {kind} queue discipline on {host}", by, kind in have,
                                    probe.missing_message(kind, release, host)))
        finally:
            bed.down()
    return out
