"""The metrics of the four studies, as pure functions. Units are SI: bits per second, seconds, ratios 0..1.

- goodput G: unique payload delivered per second; throughput T: payload put on the wire, retransmissions
  included (study 001, §3.2).
- T_max: what the measured flows could use — for the system the bottleneck's payload capacity, for a flow
  its fair share.
- EEE (Extra Energy Expenditure, "3E") = 1·(T−G)/T_max + 0.3·(T_max−T)/T_max: wasted transmissions weigh
  1, unused capacity 0.3 (study 001).
- UAR (Unexploited Available Resources) = 1 − [0.5·T/T_max + 0.5·G/T], with G/T taken as 0 when T = 0.
- Jain fairness = (Σx)² / (n·Σx²).
"""
from __future__ import annotations

from collections.abc import Sequence

ETH_HEADER = 14          # bytes of Ethernet header counted by the shaper (no preamble/FCS on veth)
IP_TCP_HEADERS = 52      # IPv4 (20) + TCP (20) + timestamps option (12)


def payload_capacity(rate_bps: float, mtu: int = 1500, mss: int | None = None) -> float:
    """The payload a link of rate_bps carries when every packet is full-sized: rate · MSS / wire size."""
    mss = mss if mss is not None else mtu - IP_TCP_HEADERS
    return rate_bps * mss / (mtu + ETH_HEADER)


def rate(delta_bytes: float, delta_t: float) -> float:
    """Bits per second over an interval; 0 for an empty interval."""
    return 8.0 * delta_bytes / delta_t if delta_t > 0 else 0.0


def eee(throughput: float, goodput: float, t_max: float) -> float:
    if t_max <= 0:
        raise ValueError(f"t_max must be positive, got {t_max}")
    return (throughput - goodput) / t_max + 0.3 * (t_max - throughput) / t_max


def uar(throughput: float, goodput: float, t_max: float) -> float:
    if t_max <= 0:
        raise ValueError(f"t_max must be positive, got {t_max}")
    efficiency = goodput / throughput if throughput > 0 else 0.0
    return 1.0 - (0.5 * throughput / t_max + 0.5 * efficiency)


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index; 1 when all equal, 1/n when one takes all. All-zero counts as fair (1)."""
    n = len(values)
    if n == 0:
        raise ValueError("jain() of no values")
    sq = sum(v * v for v in values)
    return 1.0 if sq == 0 else sum(values) ** 2 / (n * sq)


def ratio(part: float, whole: float) -> float:
    """part/whole, 0 when whole is 0 (a loss or retransmission rate over an idle interval)."""
    return part / whole if whole > 0 else 0.0


def queueing_delay(backlog_bytes: float, rate_bps: float) -> float:
    """Seconds a packet arriving behind backlog_bytes waits at a link of rate_bps."""
    return 8.0 * backlog_bytes / rate_bps if rate_bps > 0 else 0.0
