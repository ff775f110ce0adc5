"""One repetition of one point, as a function of its inputs: a Unit in, its archive folder and a record out.

    record = run(Unit(point, rep, out, prefix, laws, ...), Lent(commands, publish, tick))

      the testbed up -> the links' conditions (BPF loss, events) -> the senders' TCP settings -> the paths'
        delayed neighbours (one ping each) -> PAUSE
        -> the measurement (measurement.py): capture and queue monitor, servers, samplers, senders at their
           start, every interval's counters -> metrics -> its folder and the publish hook
      every part is entered into one exit stack as it is set up, so the teardown is automatic and in reverse
      order, on success, on error, on Ctrl-C and SIGTERM (a second signal only says what is still being removed)

A repetition writes nothing outside its own folder and reads nothing of the run's but its Unit: the run
(runner.py) plans the pairs, loads the congestion-control laws once for the whole run (kernel-wide, shared by
name: `laws`), records env.json and summary.json, and aggregates. Its names (namespaces, devices, BPF pins,
processes) all carry the unit's prefix, so two repetitions run side by side and `ccrig clean` finds whatever a
killed one left. What it set up that the run records once (the senders' settings, how each link's loss is
realised, PAUSE's mode, the testbed's description) comes back in the record's `setup`.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ccrig.commands import Commands
from ccrig.samples import Sample
from ccrig.topologies import delayline, testbeds
from ccrig.topologies.testbed import Testbed
from ccrig.experiments import spec as specmod
from ccrig.experiments.events.conditions import LinkConditions
from ccrig.experiments.run import pause_run, schedule, signals
from ccrig.experiments.run.measurement import Measurement
from ccrig.experiments.run.preflight import delay_via, loss_by_netem, netem_here
from ccrig.experiments.run.sender_tcp import SenderTcp
from ccrig.experiments.workloads import Flow

BASELINE = "baseline"   # the variant of a PAUSE point run without PAUSE (T1 = T2 = B2), beside the point


@dataclass(frozen=True)
class Unit:
    """Everything one repetition needs and nothing of the run's (picklable: a pool or a fleet member runs it)."""
    point: specmod.Point
    rep: int
    out: Path                   # its archive folder; nothing is written outside it
    prefix: str                 # every name it makes starts with this (unique to the repetition)
    laws: dict[int, str]        # flow index -> the kernel's name of its law, loaded by the run
    experiment: str             # the spec's name and the run's id: the labels of its samples
    run_id: str
    variant: str = ""           # "" or BASELINE
    seed: int | None = None     # the run's seed: each flow's random times derive from it (schedule.flow_seed)
    describe: bool = False      # record the testbed's description in `setup` (the run's first pair does)

    @property
    def labels(self) -> dict:
        # a PAUSE point and its baseline are told apart by PAUSE's own label (pause: on | off)
        return {"experiment": self.experiment, "run": self.run_id, "point": str(self.point.index),
                "rep": str(self.rep)}


@dataclass
class Lent:
    """What the run lends a repetition while it runs: the command log, where samples go live, the progress."""
    commands: Commands
    publish: Callable[[list[Sample]], None] = field(default=lambda samples: None)
    tick: Callable[[], None] = field(default=lambda: None)


def make_testbed(exp: specmod.Experiment, topology, commands: Commands, prefix: str) -> Testbed:
    """The testbed the spec names, with its section of the spec (`<kind>: {...}`) as its options."""
    return testbeds.get(exp.testbed)(topology, commands, prefix, getattr(exp, exp.testbed, None))


def flows_of(exp: specmod.Experiment, topo, laws: dict[int, str], rep: int = 0, seed: int | None = None,
             point: int = 0) -> list[Flow]:
    """The point's flows placed on the topology's pairs (round robin, turned by the repetition under pair_order:
    rotate), each with its law's kernel name and, given the run's seed, its random times' seed; a flow with a
    stop sends from its start to its stop."""
    pairs = exp.flow_pairs(topo, rep)
    out = []
    for i, f in enumerate(exp.flow_list()):
        duration = exp.duration if f.stop is None else f.stop - f.start
        cc, label = (laws[i], f.cc_label) if f.workload.congestion_control else ("", "none")   # UDP: none
        out.append(Flow(f.workload, i, cc, label, *pairs[i], start=f.start, duration=duration, name=f.label or "",
                        seed=None if seed is None else schedule.flow_seed(seed, point, rep, i)))
    return out


class Parts(ExitStack):
    """The repetition's parts in the order they were set up, each closed in reverse order, always; their names
    say what is still being removed when a second Ctrl-C comes during the teardown."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def add(self, name: str, close: Callable[[], object]) -> None:
        self.names.append(name)

        def closing():
            try:
                close()
            finally:
                self.names.remove(name)
        self.callback(closing)

    def remaining(self) -> str:
        return ", ".join(reversed(self.names))


def run(unit: Unit, lent: Lent) -> dict:
    """Runs the repetition and returns its record (what repetition.json keeps); raises RunError when a program or
    sampler failed, signals.Interrupted on Ctrl-C or SIGTERM, after tearing everything down either way."""
    exp = unit.point.experiment
    topo = exp.topology.build(exp.n_flows)
    unit.out.mkdir(parents=True, exist_ok=True)
    parts = Parts()
    try:
        setup, state = _set_up(unit, topo, lent.commands, parts)
        flows = flows_of(exp, topo, unit.laws, unit.rep, unit.seed, unit.point.index)
        entry = Measurement(unit, topo, flows, state, lent, parts).run()
        entry["setup"] = setup
        return entry
    finally:
        with signals.deferred(parts.remaining):
            parts.close()


@dataclass
class State:
    """The set-up parts the measurement reads."""
    testbed: Testbed
    links: LinkConditions
    pause: pause_run.PauseRun | None
    probed: dict = field(default_factory=dict)   # each delayed path's echo round trip, before any flow


def _set_up(unit: Unit, topo, commands: Commands, parts: Parts) -> tuple[dict, State]:
    exp = unit.point.experiment
    # random loss the BPF program realises is taken off the links the testbed builds
    links = LinkConditions(exp, topo, netem_here(exp, commands, unit.prefix), loss_by_netem(exp))
    # added delay: netem, or a delay line the testbed puts on each delayed link (topologies/delayline)
    via = delay_via(exp, commands, unit.prefix)[0]
    built, lines = delayline.plan(links.realised, via == "line")
    testbed = make_testbed(exp, built, commands, unit.prefix)
    testbed.lines = lines
    parts.add(f"the {exp.testbed} testbed ({unit.prefix}-*)", testbed.down)
    testbed.up()
    parts.add("the link conditions", links.close)
    links.start(testbed, commands, unit.out)
    pairs = exp.flow_pairs(topo, unit.rep)
    sender_tcp = SenderTcp(testbed, [(i, f, *pairs[i]) for i, f in enumerate(exp.flow_list())])
    parts.add("the senders' TCP settings", sender_tcp.restore)
    setup = {"sender_tcp": sender_tcp.apply(), "links": {**links.describe(), "delay": delayline.describe(topo, via)}}
    # the path's neighbours resolved before any SYN: its RTT sample is the path's, not the path's plus ARP's
    # (only where delay is added: elsewhere ARP costs the SYN microseconds, and the delay check reads no RTT)
    delayed = {pair: rtt for pair in set(pairs) if (rtt := topo.rtt(*pair)) > 0}
    probed = testbed.resolve_neighbours(list(delayed), 2 * max(delayed.values()) + 1) if delayed else {}
    if probed:
        setup["echo_rtt_s"] = {f"{a}->{b}": v for (a, b), v in sorted(probed.items())}
    pause = pause_run.PauseRun.of(exp, topo, testbed, commands, unit.out)
    if pause is not None:
        parts.add("PAUSE", pause.stop)
        pause.start()   # before the traffic
        setup["pause"] = pause.describe()
    if unit.describe:
        setup["topology"] = testbed.describe()
    return setup, State(testbed, links, pause, probed)
