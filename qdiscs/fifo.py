"""Drop-tail: pfifo counts packets, bfifo counts bytes (tc-pfifo(8)).

The buffer comes from the link (`buffer: 100pkt` or `buffer: 64kb`) unless `limit` is given here. Packet limits
mean wire packets only because every emulated interface sends wire-sized packets (see topologies/netns.py).
"""
from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from experiments.errors import InputError
from experiments.units import Size, parse_size
from .base import Qdisc


class Pfifo(Qdisc):
    kind: Literal["pfifo"] = "pfifo"
    limit: int | None = None  # packets

    @field_validator("limit")
    @classmethod
    def _positive(cls, v):
        if v is not None and v < 1:
            raise ValueError("a packet limit must be at least 1")
        return v

    def qdisc_args(self, buffer, rate_bps, mtu):
        limit = self.limit
        if limit is None:
            if buffer is None:
                limit = 1000
            elif buffer.packets is not None:
                limit = buffer.packets
            else:  # a byte buffer for a packet queue: as many full-size packets as fit
                limit = max(1, buffer.bytes // (mtu + 14))
        return ["pfifo", "limit", str(limit)]


class Bfifo(Qdisc):
    kind: Literal["bfifo"] = "bfifo"
    limit: int | str | None = None  # bytes, or a size string such as "64kb"

    @field_validator("limit")
    @classmethod
    def _size(cls, v):
        if v is None:
            return v
        size = parse_size(v if isinstance(v, str) else f"{v}b")
        if size.bytes is None or size.bytes < 1:
            raise ValueError("a byte limit must be a positive size in bytes such as 64kb")
        return size.bytes

    def qdisc_args(self, buffer, rate_bps, mtu):
        limit = self.limit
        if limit is None:
            if buffer is None:
                limit = 1000 * (mtu + 14)
            elif buffer.bytes is not None:
                limit = buffer.bytes
            else:
                limit = buffer.packets * (mtu + 14)
        return ["bfifo", "limit", str(limit)]
