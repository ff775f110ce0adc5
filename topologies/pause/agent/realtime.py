"""Making a process of the PAUSE program react in microseconds rather than milliseconds."""
from __future__ import annotations

import ctypes
import os

PR_SET_TIMERSLACK = 29


def speed_up() -> None:
    """Timer slack 1 ns and SCHED_FIFO where allowed: a 100 µs sleep then lasts ~100 µs, not 150+."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        pass
