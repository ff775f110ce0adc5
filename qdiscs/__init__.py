"""Queue disciplines: one small class per discipline (see base.py), looked up by `kind`."""
from __future__ import annotations

from .base import Qdisc
from .fifo import Bfifo, Pfifo

# every discipline ccrig knows, by tc kind; the spec's `qdisc:` is validated against these
KINDS: dict[str, type[Qdisc]] = {cls.model_fields["kind"].default: cls for cls in (Pfifo, Bfifo)}


def qdisc_union():
    """The pydantic type of a spec's `qdisc:` field: a discriminated union over KINDS."""
    from typing import Annotated, Union
    from pydantic import Field
    return Annotated[Union[tuple(KINDS.values())], Field(discriminator="kind")]
