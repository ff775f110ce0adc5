"""What every link event is: the spec's entry (a pydantic model whose `kind` names it), when it happens, and what
it does to the link when it begins and, with `for`, when it ends.

    events:
      - {kind: down, link: r1-r2, at: 5s, for: 0.2s, every: 5s}      # a handoff: nothing passes for 0.2 s
      - {kind: rate, link: r1-r2, at: 10s, rate: 5mbit}              # r1's egress toward r2 from 10 s on
      - {kind: loss, link: r2-d1, at: 10s, for: 5s, loss: 0.05}
      - {kind: delay, link: r2-d1, at: 10s, delay: 50ms}             # netem only

`link: a-b` is a's egress toward b (down takes both directions). `every` repeats the event from `at` until the
end of the run (or `until`); `for` undoes it after that long (without it, the change lasts).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ccrig.fields import TimeField
from ccrig.topologies.loss.program import LinkDropper
from ccrig.topologies.testbed import Testbed
from ccrig.topologies.topology import Topology


@dataclass
class LinkState:
    """What the events act on during a repetition: the testbed, the topology as the spec made it (each link's own
    rate, delay and loss, restored after `for`) and as the testbed realised it (loss moved to the BPF program
    where netem is missing), the BPF droppers by direction, and whether the kernel has netem."""
    testbed: Testbed
    topology: Topology
    realised: Topology
    droppers: dict[tuple[str, str, str], LinkDropper] = field(default_factory=dict)   # by (a, b, hook)
    netem: bool = False


class LinkEvent(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    kind: str
    link: str = Field(pattern=r"^[A-Za-z0-9_]+-[A-Za-z0-9_]+$")
    at: TimeField = 0.0
    every: TimeField | None = None
    lasts: TimeField | None = Field(None, alias="for")
    until: TimeField | None = None
    # the event acts on both directions of the link (down) or on a's egress toward b only
    both_ways: ClassVar[bool] = False
    # it needs netem on the link (delay); otherwise the BPF program realises it
    needs_netem: ClassVar[bool] = False
    # it acts through the BPF program on its direction(s) (down, loss), hooked there (topologies/loss DropPoint)
    uses_dropper: ClassVar[bool] = True
    hook: ClassVar[str] = "egress"

    @model_validator(mode="after")
    def _times(self):
        if self.every is not None and self.every <= 0:
            raise ValueError(f"every: got {self.every:g}s; expected a positive period")
        if self.lasts is not None and self.lasts <= 0:
            raise ValueError(f"for: got {self.lasts:g}s; expected a positive time")
        if self.every is not None and self.lasts is not None and self.lasts >= self.every:
            raise ValueError(f"for: got {self.lasts:g}s with every {self.every:g}s; expected an event shorter "
                             f"than its period")
        if self.until is not None and self.until <= self.at:
            raise ValueError(f"until: got {self.until:g}s; expected a time after `at` ({self.at:g}s)")
        return self

    @property
    def ends(self) -> tuple[str, str]:
        a, b = self.link.split("-")
        return a, b

    def directions(self) -> list[tuple[str, str]]:
        a, b = self.ends
        return [(a, b), (b, a)] if self.both_ways else [(a, b)]

    def times(self, duration: float) -> list[tuple[float, bool]]:
        """(time, begins) for every beginning and end within the run, in order."""
        last = min(duration, self.until if self.until is not None else duration)
        starts = [self.at]
        if self.every is not None:
            while starts[-1] + self.every < last:
                starts.append(starts[-1] + self.every)
        out = []
        for t in starts:
            if t >= last:
                break
            out.append((t, True))
            if self.lasts is not None and t + self.lasts < duration:
                out.append((t + self.lasts, False))
        return out

    def capacity_while_on(self, topology: Topology) -> dict[tuple[str, str], float]:
        """The payload capacity (bit/s) this event gives the links it changes while it is on: what the flows could
        use then (analysis/capacity.py). Empty: it changes no link's capacity (loss and delay change what TCP
        gets, not what the link could carry)."""
        return {}

    def check(self, topology: Topology, netem: bool) -> str | None:
        """Why this event cannot act on the topology as this testbed realises it (None: it can)."""
        return None

    def begin(self, state: LinkState) -> str:
        """Makes the change; returns what it did, for events.csv (e.g. "down", "rate 5mbit")."""
        raise NotImplementedError

    def end(self, state: LinkState) -> str:
        """Undoes it (after `for`); returns what it did."""
        raise NotImplementedError
