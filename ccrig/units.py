"""Units in spec strings, parsed once into SI numbers.

Rates are bits per second ("10mbit", "1.5gbit", "800kbit", "1000bit") or packets per second ("100pps");
times are seconds ("20ms", "1.5s", "250us"); sizes are packets ("100pkt") or bytes ("64kb", "1500b").
Decimal prefixes as tc(8) writes them: kbit = 1000 bit, kb = 1000 bytes; "kib"/"mib" are binary.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_NUM = r"(?P<num>-?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>[a-zA-Z]*)"

_RATE_BITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
              "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}
_TIME = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "msec": 1e-3, "us": 1e-6, "usec": 1e-6, "ns": 1e-9,
         "min": 60.0}
_BYTES = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3}
_PACKETS = {"pkt", "pkts", "p", "packet", "packets"}


# --- the ranges a spec's quantities must lie in, and why -------------------------------------------------
# Rates: what tc can shape, checked with htb on kernel 6.18 / iproute2: tc keeps a rate in whole bytes per second
# and refuses less than one ('"rate" is required' for 7bit); htb's rate field holds 32 bits of bytes/s, so
# 2^32 bytes/s (34.36 Gbit/s) is the most it takes as given; above it tc falls back to a 64-bit extension
# and the class's burst is no longer kept (15140 bytes set, 10000b shown at 40gbit).
MIN_RATE_BPS = 8.0
MAX_RATE_BPS = 8.0 * 2 ** 32
RATE_RANGE = "from 8bit (1 byte/s, the least tc shapes) to 34.36gbit (2^32 bytes/s, the most htb's rate holds)"
# Buffers: at least one full-size packet (a smaller queue drops every full-size packet, and the run ends in
# "No route to host" from iperf3), at most 2^32 - 1 packets or bytes (tc's fifo limits are 32 bits).
MAX_LIMIT = 2 ** 32 - 1
# Times: a day at most; no experiment, delay or timer of ours is longer, and a typo (20s for 20ms) is caught.
MAX_TIME_S = 86400.0


def wire_bytes(mtu: int) -> int:
    """A full-size packet as a queue sees it: the IP packet plus the Ethernet header."""
    return mtu + 14


class UnitError(ValueError):
    """A value that is not a quantity of the expected kind; the message says what is accepted."""


@dataclass(frozen=True)
class Rate:
    """A link or source rate: exactly one of bits_per_s or packets_per_s is set."""
    bits_per_s: float | None = None
    packets_per_s: float | None = None

    def bps(self, packet_bytes: int) -> float:
        return self.bits_per_s if self.bits_per_s is not None else self.packets_per_s * packet_bytes * 8

    def tc(self, packet_bytes: int) -> str:
        """The rate as tc(8) takes it, in whole bits per second."""
        return f"{round(self.bps(packet_bytes))}bit"

    def scaled(self, factor: float) -> "Rate":
        return Rate(None if self.bits_per_s is None else self.bits_per_s * factor,
                    None if self.packets_per_s is None else self.packets_per_s * factor)

    def __str__(self) -> str:
        return f"{self.packets_per_s:g}pps" if self.packets_per_s is not None else f"{self.bits_per_s:g}bit"


@dataclass(frozen=True)
class Size:
    """A buffer or transfer size: exactly one of packets or bytes is set."""
    packets: int | None = None
    bytes: int | None = None

    def __str__(self) -> str:
        return f"{self.packets}pkt" if self.packets is not None else f"{self.bytes}b"


def _split(text, kind: str, accepted: str):
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise UnitError(f"not a {kind}; expected {accepted}")
    m = re.fullmatch(_NUM, str(text).strip())
    if not m:
        raise UnitError(f"not a {kind}; expected {accepted}")
    return float(m.group("num")), m.group("unit").lower()


RATE_HELP = 'a rate such as "10mbit", "800kbit", "1gbit" or "100pps"'
TIME_HELP = 'a time such as "20ms", "1.5s" or "250us"'
SIZE_HELP = 'a size such as "100pkt", "64kb" or "1500b"'


def parse_rate(text) -> Rate:
    num, unit = _split(text, "rate", RATE_HELP)
    if unit == "pps":
        value = Rate(packets_per_s=num)
    elif unit in _RATE_BITS:
        value = Rate(bits_per_s=num * _RATE_BITS[unit])
    else:
        raise UnitError(f"unknown rate unit {unit!r}; expected {RATE_HELP}")
    if num <= 0:
        raise UnitError(f"a rate must be positive; expected {RATE_HELP}")
    if value.bits_per_s is not None:
        check_bps(value.bits_per_s)
    return value


def check_bps(bps: float) -> None:
    """Raises UnitError unless a rate in bit/s is one tc can shape (RATE_RANGE). A packets/s rate is checked
    where its packet size is known (the topology), after conversion."""
    if not MIN_RATE_BPS <= bps <= MAX_RATE_BPS:
        raise UnitError(f"expected a rate {RATE_RANGE}")


def parse_time(text) -> float:
    num, unit = _split(text, "time", TIME_HELP)
    if unit not in _TIME:
        raise UnitError(f"unknown time unit {unit!r}; expected {TIME_HELP}")
    return num * _TIME[unit]


def parse_size(text) -> Size:
    num, unit = _split(text, "size", SIZE_HELP)
    if num <= 0:
        raise UnitError(f"a size must be positive; expected {SIZE_HELP}")
    if unit in _PACKETS:
        if num != int(num):
            raise UnitError(f"a packet count must be whole; expected {SIZE_HELP}")
        return Size(packets=int(num))
    if unit in _BYTES:
        return Size(bytes=int(round(num * _BYTES[unit])))
    raise UnitError(f"unknown size unit {unit!r}; expected {SIZE_HELP}")


def buffer_problem(size: Size, wire_bytes: int) -> str | None:
    """What is wrong with a link buffer for packets of wire_bytes on the wire, or None: at least one full-size
    packet, at most MAX_LIMIT packets or bytes."""
    least = f"at least 1 packet or one full-size packet in bytes ({wire_bytes}b)"
    if size.packets is not None:
        ok = 1 <= size.packets <= MAX_LIMIT
    else:
        ok = wire_bytes <= size.bytes <= MAX_LIMIT
    return None if ok else f"a buffer of {least} and at most {MAX_LIMIT} packets or bytes (tc's 32-bit limit)"


def format_bps(bps: float) -> str:
    for div, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if abs(bps) >= div:
            return f"{bps / div:.3g} {unit}"
    return f"{bps:.3g} bit/s"
