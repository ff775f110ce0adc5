"""Queue disciplines: one small class per discipline (see base.py), looked up by `kind`.

    from ccrig.qdiscs import KINDS, from_spec
    red = from_spec({"kind": "red", "ecn": True})
    shaped_argv("eth0", 10e6, red, Size(packets=100), 1500)     # qdiscs/shaper.py

Statistics: qdiscs/stats.py; which disciplines the running kernel has: qdiscs/probe.py.
"""
from __future__ import annotations

from pydantic import ValidationError

from ccrig.errors import InputError, field_error
from .base import Qdisc
from .codel import Codel, FqCodel
from .drr import Drr
from .fifo import Bfifo, Pfifo
from .fq import Fq, Sfq
from .pie import Pie
from .red import Red

# every discipline ccrig knows, by tc kind; the spec's `qdisc:` is validated against these
KINDS: dict[str, type[Qdisc]] = {cls.model_fields["kind"].default: cls
                                 for cls in (Pfifo, Bfifo, Red, Fq, Sfq, Drr, FqCodel, Codel, Pie)}


def qdisc_union():
    """The pydantic type of a spec's `qdisc:` field: a discriminated union over KINDS."""
    from typing import Annotated, Union
    from pydantic import Field
    return Annotated[Union[tuple(KINDS.values())], Field(discriminator="kind")]


def from_spec(value, path: str = "qdisc") -> Qdisc:
    """A discipline from a spec value (`red` or `{kind: red, ecn: true}`), with the spec's error shape."""
    if isinstance(value, Qdisc):
        return value
    raw = {"kind": value} if isinstance(value, str) else value
    if not isinstance(raw, dict):
        raise field_error(path, value, "a discipline name or a mapping with `kind`")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise field_error(f"{path}.kind", kind, f"one of {', '.join(KINDS)}")
    try:
        return KINDS[kind].model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            allowed = ", ".join(f for f in KINDS[kind].model_fields if f != "kind")
            raise InputError(f"{path}.{where}: unknown field for {kind}; expected one of: {allowed}") from None
        # field errors start "got ...": the location names the field; model errors name it themselves
        if where and not msg.startswith("got "):
            msg = f"got {first.get('input')!r}; {msg}"
        raise InputError(f"{path}.{where}: {msg}" if where else f"{path}.{msg}") from None


__all__ = ["KINDS", "Qdisc", "qdisc_union", "from_spec", "Pfifo", "Bfifo", "Red", "Fq", "Sfq", "Drr",
           "FqCodel", "Codel", "Pie"]
