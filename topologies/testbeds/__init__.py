"""The testbeds, one module each, found by their `kind`: a module (or package) of this folder that names its class
`TESTBED` is the testbed of that class's kind (netns.py is `testbed: netns`). A new testbed is one module here plus
its tests: the spec, preflight, cleanup and the runner ask the registry and the class, never a list of names.

A testbed whose module cannot be imported on this machine (mininet's needs Debian's Mininet) stays known by its
module's name, and using it says why it is missing.
"""
from __future__ import annotations

from ccrig.kinds import Kinds
from ..testbed import Testbed


def _testbed_of(module) -> dict[str, type[Testbed]]:
    cls = getattr(module, "TESTBED", None)
    return {cls.kind: cls} if cls is not None else {}


KINDS = Kinds(__name__, __path__, _testbed_of, "testbed")

# `testbed: auto`: the first where the running kernel has everything a spec needs, else the second
AUTO_HERE, AUTO_ELSEWHERE = "netns", "vm"


def kinds() -> list[str]:
    """Every testbed's name, available here or not."""
    return KINDS.kinds()


def available() -> dict[str, type[Testbed]]:
    """The testbeds whose modules import on this machine."""
    return KINDS.available()


def get(kind: str, field: str = "testbed") -> type[Testbed]:
    """The testbed class of a kind; a name that is unknown, or whose module is missing here, is an input error."""
    return KINDS.get(kind, field)


def of(testbed: str) -> type[Testbed]:
    """The testbed class a spec's `testbed:` names; `auto` as this machine's choice (AUTO_HERE) until preflight
    decides it."""
    return get(AUTO_HERE if testbed == "auto" else testbed)
