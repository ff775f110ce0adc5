"""What every queue discipline is: validated parameters that render to tc argv, and statistics read back.

A discipline sits under the bottleneck's shaper (htb), so scheduling and rate are separate: see shaper.py.
Each subclass is a pydantic model whose `kind` names it; it renders the words after `tc qdisc add dev D
parent P handle H` and, where a discipline needs classes or filters under it (drr), the extra commands; it
says which of its statistics are gauges and whether its classes are read.

Limits left unset come from the link's buffer (`buffer: 100pkt` or `buffer: 64kb`), converted with the wire
packet size (MTU + Ethernet header) where the discipline counts the other unit, so a sweep over buffer sizes
means the same thing for every discipline.
"""
from __future__ import annotations

from typing import Annotated, ClassVar, Optional, Sequence, Union

from pydantic import AfterValidator, BaseModel, ConfigDict

from ccrig.fields import TimeField
from ccrig.units import Size, parse_size, wire_bytes

# tc's default queue length for a device (txqueuelen), used when neither the discipline nor the link sets one
DEFAULT_PACKETS = 1000


def packet_limit(limit: int | None, buffer: Size | None, mtu: int, default: int = DEFAULT_PACKETS) -> int:
    """A discipline's limit in packets: its own, else the link's buffer, else default."""
    if limit is not None:
        return limit
    if buffer is None:
        return default
    if buffer.packets is not None:
        return buffer.packets
    # a byte buffer for a packet queue: as many full-size packets as fit
    return max(1, buffer.bytes // wire_bytes(mtu))


def byte_limit(limit: int | None, buffer: Size | None, mtu: int,
               default_packets: int = DEFAULT_PACKETS) -> int:
    """A discipline's limit in bytes: its own, else the link's buffer, else default_packets full-size packets."""
    if limit is not None:
        return limit
    if buffer is None:
        return default_packets * wire_bytes(mtu)
    if buffer.bytes is not None:
        return buffer.bytes
    return buffer.packets * wire_bytes(mtu)


def check_positive(v, allow_zero: bool = False):
    """Validator body for counts and sizes (pydantic's error location names the field)."""
    if v is None:
        return v
    if isinstance(v, bool) or v < 0 or (v == 0 and not allow_zero):
        least = "0 or more" if allow_zero else "at least 1"
        raise ValueError(f"got {v!r}; expected {least}")
    return v


def to_bytes(v):
    """A byte quantity given as an int (bytes) or a size string ("64kb", "1514b"); packets are refused."""
    if v is None or (isinstance(v, int) and not isinstance(v, bool)):
        return check_positive(v)
    try:
        size = parse_size(v)
    except ValueError as e:
        raise ValueError(f"got {v!r}; {e}") from None
    if size.bytes is None:
        raise ValueError(f"got {v!r}; expected bytes such as 30000 or \"30kb\"")
    return check_positive(size.bytes)


def positive_time(v):
    if v is not None and v <= 0:
        raise ValueError(f"got {v:g}s; expected a positive time such as 5ms")
    return v


# The parameter kinds the disciplines share, validated alike (pydantic's error location names the field):
Count = Annotated[Optional[int], AfterValidator(check_positive)]            # packets, buckets: at least 1
Bytes = Annotated[Union[int, str, None], AfterValidator(to_bytes)]          # 30000 or "30kb"
PositiveTime = Annotated[Optional[TimeField], AfterValidator(positive_time)]  # "5ms"


def tc_time(seconds: float) -> str:
    """A time as tc(8) takes it, in whole microseconds (tc's own resolution)."""
    return f"{round(seconds * 1e6)}us"


class Qdisc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    # the kernel module that provides the discipline (for the capability probe's advice)
    module: ClassVar[str] = ""
    # the kernel build option that provides it (CONFIG_<kconfig>), so a test can ask the kernel's own config
    kconfig: ClassVar[str] = ""
    # its own statistics (qdiscs/stats.py: columns <kind>_<name>) that go up and down; the others only count up
    gauges: ClassVar[frozenset[str]] = frozenset()

    def qdisc_args(self, buffer: Size | None, rate_bps: float | None, mtu: int) -> list[str]:
        """The words after `tc qdisc add dev D parent P handle H`, e.g. ["pfifo", "limit", "100"]."""
        raise NotImplementedError

    def setup_argv(self, dev: str, parent: str, handle: str, buffer: Size | None, rate_bps: float | None,
                   mtu: int, flows: int, flow_sources: Sequence[str] | None = None) -> list[list[str]]:
        """All tc commands that install the discipline at parent with the given handle.

        flows is the number of flows crossing the link; flow_sources, where the caller knows them, their
        source addresses (one per flow). Only disciplines that classify (drr) use them."""
        return [["tc", "qdisc", "add", "dev", dev, "parent", parent, "handle", handle,
                 *self.qdisc_args(buffer, rate_bps, mtu)]]

    def classes_under(self, handle: str) -> str | None:
        """The parent whose classes `tc class show` reads for their statistics, installed at handle; None for
        a discipline without classes of its own (the default)."""
        return None

    def label(self) -> str:
        return self.kind
