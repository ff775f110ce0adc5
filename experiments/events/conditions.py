"""One repetition's link conditions: random loss where the BPF program realises it, and the link events on their
schedule, with every drop counted.

    cond = LinkConditions(exp, topology, netem, loss_by_netem)   # plans: which directions carry the BPF program
    testbed = make_testbed(..., cond.realised, ...)   # the topology as built (BPF loss taken off netem)
    cond.start(testbed, commands, out)                # after up(): attach, set loss, open events.csv
    cond.start_clock(t0, labels)                      # the steps on their own thread, from t0
    cond.applied() -> samples                         # the steps applied since the last call
    cond.drops() -> (dropped, offered)                # packets dropped at the links so far, and how many of
                                                      # them the bottleneck never saw (added to its offered)
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from ccrig.commands import Commands
from ccrig.samples import Sample
from ccrig.threads import Thread
from ccrig.topologies import loss
from ccrig.topologies.loss.program import attach_all
from ccrig.topologies.testbed import Testbed
from ccrig.topologies.topology import Topology
from ccrig.experiments.events import EventLog, LinkState, dropper_directions, schedule


class LinkConditions:
    def __init__(self, exp, topology: Topology, netem: bool, loss_by_netem: bool | None = None):
        """netem: whether the links' kernel has it (delay events need it); loss_by_netem: whether random loss is
        netem's (default: where there is netem) or the BPF program's."""
        self.topology = topology
        self.netem = netem
        self.events = list(getattr(exp, "events", []))
        self.realised, self.points = loss.plan(topology, netem if loss_by_netem is None else loss_by_netem,
                                               dropper_directions(self.events))
        self.steps = schedule(self.events, exp.duration)
        # the drop points whose loss a `loss` event changes: their p is not fixed over the repetition
        self.loss_changed = {(*d, e.hook) for e in self.events if e.kind == "loss" for d in e.directions()}
        self.state: LinkState | None = None
        self.log: EventLog | None = None
        # the events' clock (applied()) and what it has done
        self.clock: Thread | None = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.done: list[Sample] = []
        self.errors: list[str] = []

    def describe(self) -> dict:
        """env.json's `links`: how each lossy direction's loss is realised, and the event schedule."""
        out = {}
        for link in self.topology.links:
            for a, b, e in ((link.a, link.b, link.a_to_b), (link.b, link.a, link.b_to_a)):
                if e.loss:
                    bpf = any(p.key == (a, b, "egress") and p.loss for p in self.points)
                    out[f"{a}->{b}"] = {"loss": loss.describe_loss(e.loss), "realised_by": "bpf (tc clsact egress, cls_bpf da)"
                                        if bpf else "netem"}
        return {"loss": out, "bpf_drop_points": [p.name for p in self.points],
                "events": [{"t": s.t, "event": s.index, "kind": s.event.kind, "link": s.event.link,
                            "begins": s.begins} for s in self.steps]}

    def capacity_changes(self) -> list[tuple[float, tuple[str, str], float | None]]:
        """(time, link, payload capacity or None: the link's own again) for every step that changes what a link
        could carry, for analysis.capacity.Capacity."""
        return [(s.t, link, cap if s.begins else None) for s in self.steps
                for link, cap in s.event.capacity_while_on(self.topology).items()]

    def start(self, testbed: Testbed, commands: Commands, out: Path) -> None:
        droppers = attach_all(testbed, self.points, commands)
        self.state = LinkState(testbed, self.topology, self.realised, droppers, self.netem)
        if self.events:
            self.log = EventLog(out / "events.csv")

    def start_clock(self, t0: float, labels: dict) -> None:
        """Applies the steps on a thread of their own from t0, so an outage of 0.2 s lasts 0.2 s whatever the
        runner is busy with at an interval's boundary."""
        if self.clock is None and self.steps:
            self.clock = Thread(self._tick, (t0, labels), name="ccrig-link-events")

    def applied(self) -> list[Sample]:
        """The samples of the steps applied since the last call."""
        with self.lock:
            out, self.done = self.done, []
        return out

    def _tick(self, t0: float, labels: dict) -> None:
        for step in self.steps:
            if self.stopping.wait(max(0.0, t0 + step.t - time.time())):
                return
            try:
                sample = self.log.apply(step, self.state, t0, labels)
            except Exception as e:   # a failed step is recorded, not fatal: the run's own numbers still hold
                self.errors.append(f"events[{step.index}] ({step.event.kind} {step.event.link}) at "
                                   f"{step.t:g}s: {e}")
                continue
            with self.lock:
                self.done.append(sample)

    def drops(self) -> tuple[float, float, dict]:
        """Packets dropped at the links so far (random loss and outages), the part of them dropped before the
        bottleneck (never offered to it), and each drop point's counts."""
        dropped = before = 0.0
        per = {}
        if self.state is None:
            return 0.0, 0.0, per
        for p in self.points:
            c = self.state.droppers[p.key].counts()
            if isinstance(p.loss, float) and p.loss > 0 and p.key not in self.loss_changed:
                # a Bernoulli loss at a fixed p: what a repetition drew against it (analysis/readings.loss_drawn)
                c["p"] = p.loss
            per[p.name] = c
            n = c.get("dropped", 0) + c.get("down_dropped", 0)
            dropped += n
            if loss.upstream(self.topology, p):
                before += n
        for name, (p, c) in self._netem_drops().items():
            per[name] = c
            dropped += c["dropped"]
            if loss.upstream(self.topology, p):
                before += c["dropped"]
        return dropped, before, per

    def _netem_drops(self) -> dict[str, dict]:
        """Where netem realises a link's loss: its drops and packets from `tc -s` (the qdisc counts its own)."""
        out = {}
        if self.state is None or not self.netem:
            return out
        for link in self.realised.links:
            for a, b, e in ((link.a, link.b, link.a_to_b), (link.b, link.a, link.b_to_a)):
                if not e.loss:
                    continue
                dev = self.state.testbed.egress_device(a, b)
                shown = self.state.testbed.run(a, ["tc", "-j", "-s", "qdisc", "show", "dev", dev], check=False,
                                               timeout=10).stdout
                try:
                    q = next((x for x in json.loads(shown or "[]") if x.get("kind") == "netem"), {})
                except json.JSONDecodeError:
                    q = {}
                out[f"{a}->{b}"] = (loss.DropPoint(a, b, e.loss),
                                    {"dropped": q.get("drops", 0), "passed": q.get("packets", 0), "by": "netem"})
        return out

    def close(self) -> None:
        self.stopping.set()
        if self.clock is not None:
            self.clock.join(timeout=10)
        if self.log is not None:
            self.log.close()
            self.log = None
        # the programs off the links (on hosts the testbed leaves remembered commands to their owner)
        for d in (self.state.droppers.values() if self.state is not None else ()):
            d.detach()
        self.state = None
