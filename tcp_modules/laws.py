"""The laws' common reference in floating point: the state a TCP sender has and how a family's increase and
decrease move it, the reference the fixed-point C core is checked against (through each family's vectors).
The families themselves (their parameters, presets and rules) are declared in families/, one descriptor each;
their names are re-exported here for the callers that knew them from this module.

TCP(alpha, beta) (GAIMD; families/alphabeta.py): per RTT without loss W += alpha; on a loss W = max(beta * W, 2).
Polynomial rules (families/poly.py): per RTT without loss W += sum_{n=1..m} (alpha / W)^(n k); on a loss
W = max(W - sum_{n=1..m} (beta W)^(n l), 2). halve_first (any family declaring it): the connection's first
loss gives max(W / 2, 2), every later one the decrease rule (State.seen_loss says which).

The state is what a TCP sender has: an integer window `cwnd` and an accumulator `acc` of increase earned
but not yet a whole segment, in units of segments x window (Reno's snd_cwnd_cnt, generalised): W acked
segments add I(W); acc >= cwnd adds a segment. A loss keeps the new window's fraction in acc. See
include/ccrig_law.h for the same text above the C code. Everything saturates at CAP segments.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .families import FAMILIES, PRESETS
from .families._family import CAP, FP, MIN_CWND, ONE, LawBase, quantize
from .families.alphabeta import AlphaBeta, friendly_alpha
from .families.poly import EXP_MAX, EXP_MIN, TERMS_MAX, Poly

__all__ = ["FAMILIES", "PRESETS", "CAP", "FP", "MIN_CWND", "ONE", "quantize", "AlphaBeta",
           "friendly_alpha", "Poly", "EXP_MIN", "EXP_MAX", "TERMS_MAX", "Law", "State", "on_ack", "on_loss",
           "loss_window_at", "on_rtt"]

# any family's reference: a frozen dataclass with increase(w), loss_window(w), params(), per_ack, halve_first
Law = LawBase


@dataclass
class State:
    cwnd: int
    acc: float = 0.0   # segments x window
    seen_loss: bool = False   # the connection has had a loss indication (a halve_first law's first is spent)

    @property
    def window(self) -> float:
        """The real-valued window: cwnd plus the earned fraction of a segment."""
        return self.cwnd + self.acc / self.cwnd


def on_ack(law: Law, s: State, acked: int) -> State:
    """acked segments acknowledged in congestion avoidance."""
    w = max(s.cwnd, 1)
    add = law.increase(w) * (w if law.per_ack else 1) * acked
    acc = s.acc + add
    if acc < w:
        return State(w, acc, s.seen_loss)
    d = math.floor(acc / w)
    acc -= d * w
    nw = w + d
    if nw > CAP:
        return State(int(CAP), 0.0, s.seen_loss)
    return State(int(nw), acc, s.seen_loss)


def loss_window_at(law: Law, w: int, seen_loss: bool) -> float:
    """The window after a loss at w: a halve_first law's first loss halves it, every other loss is the law's."""
    if law.halve_first and not seen_loss:
        return max(w / 2, MIN_CWND)
    return law.loss_window(w)


def on_loss(law: Law, s: State) -> State:
    """A loss indication (triple duplicate ACK, or a timeout's ssthresh): the decrease rule (the halving for a
    halve_first law's first); the fraction stays in acc."""
    nw = loss_window_at(law, s.cwnd, s.seen_loss)
    segs = math.floor(nw)
    return State(segs, (nw - segs) * segs, True)


def on_rtt(law: Law, s: State) -> State:
    """One round trip without loss: a window's worth of single-segment ACKs."""
    for _ in range(s.cwnd):
        s = on_ack(law, s, 1)
    return s
