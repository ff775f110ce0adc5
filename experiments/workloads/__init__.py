"""Workloads: the traffic of a point, one module per kind, found by `kind` as the queue disciplines are.

    bulk.py     an always-backlogged flow (iperf3); the default
    files.py    finite files with idle time (filexfer.py, its program)

A module of this package that defines a Workload subclass (base.py) with a `kind` of its own is that workload:
the spec's `workload:` accepts it (workload_union), and the runner starts it (Traffic, traffic.py) and reads its
results through the class's hooks. A new workload is one module here plus its tests.

    Flow(workload, index, cc, label, sender, receiver, start, duration, name="")     one flow of a point
    Traffic(testbed, flows, out_dir)                                              starts and stops them

Modules are imported the first time the registry is asked, so `python -m ccrig.experiments.nodes.filexfer`
runs the program without importing it twice.
"""
from __future__ import annotations

from ccrig.kinds import Kinds, subclasses_with_kind
from ccrig.experiments.workloads.base import CLIENT_PORT, SERVER_PORT, Flow, Workload
from ccrig.experiments.workloads.traffic import Traffic

DEFAULT = "bulk"   # a flow's workload when the spec names none

KINDS = Kinds(__name__, __path__, subclasses_with_kind(Workload), "workload")


def kinds() -> list[str]:
    """Every workload's name."""
    return KINDS.kinds()


def get(kind: str, field: str = "workload.kind") -> type[Workload]:
    """The workload class of a kind; an unknown name is an input error."""
    return KINDS.get(kind, field)


def workload_union():
    """The pydantic type of a flow's `workload:` field: a union over the kinds, discriminated by `kind`."""
    return KINDS.union()


def default() -> Workload:
    """The workload of a flow whose spec names none."""
    return get(DEFAULT)()


__all__ = ["CLIENT_PORT", "SERVER_PORT", "DEFAULT", "Flow", "Traffic", "Workload", "default", "get", "kinds",
           "workload_union"]
