"""Queue disciplines: one small class per discipline (see base.py), one module per discipline, found by `kind`
as the workloads and link events are.

    from ccrig import qdiscs
    red = qdiscs.from_spec({"kind": "red", "ecn": True})
    shaped_argv("eth0", 10e6, red, Size(packets=100), 1500)     # qdiscs/shaper.py
    qdiscs.classes_under(red)                                   # None: red has no classes of its own

A module of this package that defines a Qdisc subclass with a `kind` of its own is that discipline: its spec
model, its tc argv (setup_argv), whether its classes are read (classes_under), which of its statistics go up
and down (gauges), its kernel module and build symbol (module, kconfig). The spec's `qdisc:` accepts it
(qdisc_union), the probe tries it, the collectors read it. A new discipline is one module here plus its tests.

Statistics: qdiscs/stats.py; which disciplines the running kernel has: qdiscs/probe.py.
"""
from __future__ import annotations

from pydantic import ValidationError

from ccrig.errors import InputError, field_error
from ccrig.kinds import Kinds, subclasses_with_kind
from .base import Qdisc
from .shaper import LEAF

# the package's machinery, not disciplines: the search for kinds does not import them
MACHINERY = frozenset({"base", "probe", "shaper", "sojourn", "stats"})

KINDS = Kinds(__name__, __path__, subclasses_with_kind(Qdisc), "queue discipline", skip=MACHINERY)


def kinds() -> list[str]:
    """Every discipline's tc kind."""
    return KINDS.kinds()


def available() -> dict[str, type[Qdisc]]:
    """kind -> class of every discipline whose module imports here."""
    return KINDS.available()


def get(kind: str, field: str = "qdisc.kind") -> type[Qdisc]:
    """The class of a discipline; an unknown kind is an input error naming field."""
    return KINDS.get(kind, field)


def qdisc_union():
    """The pydantic type of a spec's `qdisc:` field: a union over the kinds, discriminated by `kind`."""
    return KINDS.union()


def classes_under(qdisc: Qdisc | None) -> str | None:
    """The parent under which `tc class show` finds a link's own classes (drr's one per flow), for the qdisc
    of a link's egress as topologies/links.py installs it (at the shaper's LEAF handle); None when it has
    none, or the link has no discipline."""
    return qdisc.classes_under(LEAF) if qdisc is not None else None


def from_spec(value, path: str = "qdisc") -> Qdisc:
    """A discipline from a spec value (`red` or `{kind: red, ecn: true}`), with the spec's error shape."""
    if isinstance(value, Qdisc):
        return value
    raw = {"kind": value} if isinstance(value, str) else value
    if not isinstance(raw, dict):
        raise field_error(path, value, "a discipline name or a mapping with `kind`")
    kind = raw.get("kind")
    if kind not in kinds():
        raise field_error(f"{path}.kind", kind, f"one of {', '.join(kinds())}")
    cls = get(kind, f"{path}.kind")
    try:
        return cls.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            allowed = ", ".join(f for f in cls.model_fields if f != "kind")
            raise InputError(f"{path}.{where}: unknown field for {kind}; expected one of: {allowed}") from None
        # field errors start "got ...": the location names the field; model errors name it themselves
        if where and not msg.startswith("got "):
            msg = f"got {first.get('input')!r}; {msg}"
        raise InputError(f"{path}.{where}: {msg}" if where else f"{path}.{msg}") from None


__all__ = ["KINDS", "LEAF", "Qdisc", "available", "classes_under", "from_spec", "get", "kinds", "qdisc_union"]
