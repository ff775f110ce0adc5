"""Keshav's Generic flow control (thesis ch. 6, §6.4): a constant window of `window` segments. No increase, no
decrease, no slow start, and a retransmission timeout does not shrink it: the sender keeps its window and
recovers its losses by the timer alone. C law: generic.h, which also asks the glue (kmod/ccrig_kmod.h,
bpf/ccrig_tcp.bpf.h) to hold the window in every state: Linux's timeout leaves one packet in flight
(tcp_enter_loss), and the first ACK after it restores the window, where every other law slow-starts back.

What recovers the losses is the sender's settings, not the law: with fast retransmit, RACK, tail loss probes and
F-RTO off (`tcp: {recovery: none, frto: false, tlp: false, reordering: 300}`) a loss waits for the timer, which
backs off (tests/host/test_generic_timeouts.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ._family import MIN_CWND, Family, LawBase, param

WINDOW_MAX = 65535


@dataclass(frozen=True)
class Generic(LawBase):
    """The fixed window in segments (it travels in the core's unsigned slot)."""
    law: str = field(default="generic", init=False)   # first: a resolved spec shows the law before its values
    window: int = param("int", lo=MIN_CWND, hi=WINDOW_MAX, slot="terms", doc="the constant window in segments")

    def increase(self, w: int) -> float:
        return 0.0

    def loss_window(self, w: int) -> float:
        return float(self.window)


def _sample(rng) -> Generic:
    return Generic(rng.choice([MIN_CWND, 3, 5, 10, 40, 100, 1000, WINDOW_MAX]))


FAMILY = Family(
    law=Generic, letter="g", code=3, tunable="generic_param",
    summary="Generic flow control (a constant window)",
    presets={"generic_5": Generic(5), "generic_40": Generic(40)},
    sample=_sample, n_random=8)
