"""Random loss on a link, with or without netem.

A link's `loss` is realised by a BPF program on the link's egress (loss.bpf.c, program.py) that drops with the
given probability, spares the rig's own connections (iperf3's control) and counts every drop; the same program
takes a link down for the link events (experiments/events/). netem (topologies/links.py) realises it only where
the caller asks (a remote testbed's hosts: experiments/run/preflight.loss_by_netem). plan() decides which for a
topology and hands the testbed a topology whose program-realised links carry no loss, plus the droppers to attach.

A loss is a ratio (Bernoulli: each packet dropped with probability `rate`) or a Gilbert-Elliott chain:

    loss: 0.01
    loss: {rate: 0.01}
    loss: {gilbert: {p: 0.01, r: 0.3, loss_bad: 1.0, loss_good: 0.0}}    # p: good->bad, r: bad->good per packet
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..topology import Link, Topology


class GilbertElliott(BaseModel):
    # frozen: it sits in a link's Egress (a frozen dataclass), which must stay hashable
    model_config = ConfigDict(extra="forbid", frozen=True)
    p: float = Field(ge=0, le=1)           # good -> bad, per packet
    r: float = Field(gt=0, le=1)           # bad -> good, per packet (0 would stay bad for ever)
    loss_bad: float = Field(1.0, ge=0, le=1)
    loss_good: float = Field(0.0, ge=0, le=1)

    @property
    def mean(self) -> float:
        """The long-run drop ratio: the chain's stationary share of the bad state weighs its loss."""
        bad = self.p / (self.p + self.r)
        return bad * self.loss_bad + (1 - bad) * self.loss_good


class LossModel(BaseModel):
    """`loss:` as a mapping: a Bernoulli rate or a Gilbert-Elliott chain (one of them)."""
    model_config = ConfigDict(extra="forbid")
    rate: float | None = Field(None, ge=0, le=1)
    gilbert: GilbertElliott | None = None

    @model_validator(mode="after")
    def _one(self):
        if (self.rate is None) == (self.gilbert is None):
            raise ValueError("expected exactly one of rate (a ratio 0..1) or gilbert {p, r, loss_bad, loss_good}")
        return self

    def realised(self) -> float | GilbertElliott:
        return self.rate if self.rate is not None else self.gilbert


@dataclass(frozen=True)
class DropPoint:
    """One link direction (node -> peer) whose loss or outages the BPF program realises: on node's egress
    (random loss, before node's queue, as the brief of netem-less loss has it) or on peer's ingress (a link
    `down`: after the link, so packets already queued at node are lost too and nothing crosses the link)."""
    node: str
    peer: str
    loss: float | GilbertElliott = 0.0
    hook: str = "egress"

    @property
    def name(self) -> str:
        return f"{self.node}->{self.peer}" + (" (ingress)" if self.hook == "ingress" else "")

    @property
    def key(self) -> tuple[str, str, str]:
        return self.node, self.peer, self.hook

    @property
    def at(self) -> str:
        """The node the program is attached on."""
        return self.node if self.hook == "egress" else self.peer


def plan(topology: Topology, netem: bool, also: set[tuple[str, str, str]] = frozenset()) -> tuple[Topology,
                                                                                                  list[DropPoint]]:
    """Which link directions get the BPF program: those with loss when the kernel has no netem, and those in
    `also` ((a, b, hook): the directions link events act on; a loss event moves the link's own loss to the
    program). Returns the topology the testbed realises (the program's loss taken off) and the drop points in
    link order."""
    points: list[DropPoint] = []
    links: list[Link] = []
    for link in topology.links:
        eg = {}
        for (a, b), e, attr in (((link.a, link.b), link.a_to_b, "a_to_b"), ((link.b, link.a), link.b_to_a,
                                                                            "b_to_a")):
            # a Gilbert-Elliott chain is always the program's (netem's gemodel drops uncounted, and Mininet's
            # TCLink takes a percentage only)
            bpf_loss = bool(e.loss) and (not netem or (a, b, "egress") in also or isinstance(e.loss, GilbertElliott))
            if bpf_loss or (a, b, "egress") in also:
                points.append(DropPoint(a, b, e.loss if bpf_loss else 0.0))
                if bpf_loss:
                    e = dataclasses.replace(e, loss=0.0)
            if (a, b, "ingress") in also:
                points.append(DropPoint(a, b, 0.0, "ingress"))
            eg[attr] = e
        links.append(Link(link.a, link.b, eg["a_to_b"], eg["b_to_a"]))
    return dataclasses.replace(topology, links=links), points


def upstream(topology: Topology, point: DropPoint) -> bool:
    """Whether a drop point's packets would otherwise have reached the bottleneck (its node is not reached from
    the bottleneck's far end without crossing the bottleneck): its drops add to the packets the system was
    offered, while a drop after the bottleneck is of a packet the bottleneck already counted."""
    if topology.bottleneck is None:
        return True
    near, far = topology.bottleneck
    seen, todo = {far}, [far]
    while todo:
        cur = todo.pop()
        for link in topology.links:
            for x, y in ((link.a, link.b), (link.b, link.a)):
                if x == cur and y not in seen and y != near:
                    seen.add(y)
                    todo.append(y)
    return point.at not in seen


def mean_loss(loss: float | GilbertElliott) -> float:
    """A link's loss as one ratio: the rate, or a chain's long-run mean."""
    return loss.mean if isinstance(loss, GilbertElliott) else float(loss)


def describe_loss(loss: float | GilbertElliott) -> float | dict:
    """A link's loss as the archive states it: the rate, or the chain with its mean."""
    return {"gilbert": loss.model_dump(), "mean": loss.mean} if isinstance(loss, GilbertElliott) else loss
