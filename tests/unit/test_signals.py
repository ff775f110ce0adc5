"""A signal's Interrupted that a finalizer swallowed is raised again (experiments/run/signals.py)."""
import signal
import sys
import time

import pytest

from ccrig.experiments.run import signals


class _SignalledInFinalizer:
    """Gets SIGINT (or signum) while its finalizer runs Python code, as Popen.__del__ after a command can."""

    def __init__(self, signum: int = signal.SIGINT):
        self.signum = signum

    def __del__(self):
        signal.raise_signal(self.signum)
        sum(range(1000))   # bytecode: where the pending handler runs, inside the finalizer


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_an_interrupt_a_finalizer_swallowed_is_raised_again_in_the_run():
    with signals.trapped():
        with pytest.raises(signals.Interrupted, match="SIGINT"):
            _SignalledInFinalizer()
            _spin(10)   # raised within RESEND_AFTER on an idle machine; the margin is a busy one's
    assert signals._lost == []


def test_the_signal_sent_again_that_comes_while_the_hook_still_runs_is_sent_once_more(monkeypatch):
    """On a busy machine the signal sent again can come before the hook has returned (CI 2026-12-06: while it
    started its thread); raised there it would be swallowed too, so it is sent once more and raised in the run."""
    with signals.trapped() as trap:
        trap.fired = True
        signals._lost.append("SIGINT")
        monkeypatch.setattr(signals, "_hooking", True)
        signal.raise_signal(signal.SIGINT)   # its handler runs here, as if inside the hook: it must not raise
        monkeypatch.setattr(signals, "_hooking", False)
        with pytest.raises(signals.Interrupted, match="SIGINT"):
            _spin(10)
    assert signals._lost == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_outside_a_run_too(signum):
    old = {s: signal.getsignal(s) for s in signals.SIGNALS}
    try:
        signals.raise_on_interrupt()
        with pytest.raises(signals.Interrupted, match=signal.Signals(signum).name):
            _SignalledInFinalizer(signum)
            _spin(10)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_another_exception_in_a_finalizer_goes_to_the_hook_there_was(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    monkeypatch.setattr(signals, "_previous_hook", sys.unraisablehook)

    class Failing:
        def __del__(self):
            raise ValueError("not a signal")
    with signals.trapped():
        Failing()
    assert [type(e) for e in seen] == [ValueError]
