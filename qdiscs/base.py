"""What every queue discipline is: validated parameters that render to tc argv, and statistics read back.

A discipline sits under the bottleneck's shaper (htb), so scheduling and rate are separate: see shaper.py.
Each subclass is a pydantic model whose `kind` names it; it renders the words after `tc qdisc add dev D
parent P handle H` and, where a discipline needs classes or filters under it (drr), the extra commands.
"""
from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from experiments.units import Size


class Qdisc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    # the kernel module that provides the discipline (for the capability probe's advice)
    module: ClassVar[str] = ""

    def qdisc_args(self, buffer: Size | None, rate_bps: float | None, mtu: int) -> list[str]:
        """The words after `tc qdisc add dev D parent P handle H`, e.g. ["pfifo", "limit", "100"]."""
        raise NotImplementedError

    def setup_argv(self, dev: str, parent: str, handle: str, buffer: Size | None, rate_bps: float | None,
                   mtu: int, flows: int) -> list[list[str]]:
        """All tc commands that install the discipline at parent with the given handle."""
        return [["tc", "qdisc", "add", "dev", dev, "parent", parent, "handle", handle,
                 *self.qdisc_args(buffer, rate_bps, mtu)]]

    def label(self) -> str:
        return self.kind
