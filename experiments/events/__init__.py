"""Link events: changes to a link during a run, one module per kind, found by `kind` as the workloads are.

    down.py    the link passes nothing (a handoff)          rate.py    a new shaping rate
    loss.py    a new random loss (BPF, counted)             delay.py   a new delay (netem only)

The spec's `events:` is a list of them (event_union). The runner expands them into a Schedule (every beginning
and end within the run, in time order), applies each step when its time comes, and records it: one line in the
repetition's events.csv (time, link, kind, what was done) and one `ccrig_link_event` sample (1 when an event
begins, 0 when it ends).
"""
from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path

from ccrig.kinds import Kinds, subclasses_with_kind
from ccrig.samples import Sample
from ccrig.topologies.topology import Topology
from ccrig.experiments.telemetry.exporter import HELP
from ccrig.experiments.events.base import LinkEvent, LinkState

HELP.setdefault("link_event", ("gauge", "A link event: 1 when it begins (down, new rate, loss or delay), 0 when "
                                        "it ends; labels link and kind"))
# t: when the change had been made (its commands returned), asked_t: when they began, planned_t: the schedule's
EVENTS_COLUMNS = ["t", "asked_t", "planned_t", "link", "kind", "action", "event"]

KINDS = Kinds(__name__, __path__, subclasses_with_kind(LinkEvent), "link event")


def kinds() -> list[str]:
    return KINDS.kinds()


def event_union():
    """The pydantic type of one entry of the spec's `events:`, discriminated by `kind`."""
    return KINDS.union()


def links_of(topology: Topology) -> list[str]:
    """The names an event's `link:` may take: a-b and b-a for every link."""
    return [n for link in topology.links for n in (f"{link.a}-{link.b}", f"{link.b}-{link.a}")]


def problems(events: list[LinkEvent], topology: Topology, netem: bool, duration: float) -> list[str]:
    """Each event that cannot act here, as `events[i].field: ...`."""
    out = []
    names = links_of(topology)
    for i, e in enumerate(events):
        if e.link not in names:
            out.append(f"events[{i}].link: got {e.link!r}; expected a link of the topology: "
                       f"{', '.join(names[:8])}{', ...' if len(names) > 8 else ''}")
            continue
        if e.at >= duration:
            out.append(f"events[{i}].at: got {e.at:g}s; expected a time before the end of the run "
                       f"(duration {duration:g}s)")
        why = e.check(topology, netem)
        if why:
            out.append(f"events[{i}] ({e.kind}): {why}")
    return out


def dropper_directions(events: list[LinkEvent]) -> set[tuple[str, str, str]]:
    """The link directions whose BPF program the events act through, with its hook: (a, b, egress|ingress)."""
    return {(*d, e.hook) for e in events if e.uses_dropper for d in e.directions()}


@dataclass(frozen=True)
class Step:
    t: float
    index: int          # the event's place in the spec's list
    begins: bool
    event: LinkEvent


def schedule(events: list[LinkEvent], duration: float) -> list[Step]:
    """Every beginning and end of every event within the run, in time order (an end before a beginning at the
    same time, so a period's `up` never follows its next `down`)."""
    steps = [Step(t, i, begins, e) for i, e in enumerate(events) for t, begins in e.times(duration)]
    return sorted(steps, key=lambda s: (s.t, s.begins, s.index))


def render(events: list[LinkEvent], duration: float) -> list[str]:
    """The schedule as preflight prints it: one line per step."""
    return [f"{s.t:8.3f}s  events[{s.index}] {s.event.kind} {s.event.link}: {'begins' if s.begins else 'ends'}"
            for s in schedule(events, duration)]


class EventLog:
    """A repetition's events.csv and the steps' Prometheus samples."""

    def __init__(self, path: Path):
        self.file = path.open("w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=EVENTS_COLUMNS)
        self.writer.writeheader()
        self.file.flush()

    def apply(self, step: Step, state: LinkState, t0: float, labels: dict) -> Sample:
        """Makes the step's change and logs it; t0 the time the traffic's clock started (unix seconds)."""
        asked = time.time()
        action = step.event.begin(state) if step.begins else step.event.end(state)
        done = time.time()
        self.writer.writerow({"t": f"{done - t0:.4f}", "asked_t": f"{asked - t0:.4f}", "planned_t": f"{step.t:.4f}",
                              "link": step.event.link, "kind": step.event.kind, "action": action,
                              "event": step.index})
        self.file.flush()
        return Sample("link_event", {**labels, "link": step.event.link, "kind": step.event.kind,
                                     "event": str(step.index)}, 1.0 if step.begins else 0.0, done)

    def close(self) -> None:
        self.file.close()


__all__ = ["EventLog", "LinkEvent", "LinkState", "Step", "dropper_directions", "event_union", "kinds",
           "links_of", "problems", "render", "schedule"]
