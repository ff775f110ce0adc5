"""Ctrl-C and SIGTERM during a run: the run stops, tears everything down and keeps what it measured.

While a run goes, SIGINT and SIGTERM raise Interrupted where the run is (trapped). While it tears down, they are
only noted (deferred): a second Ctrl-C must not cut the teardown short, so it is raised once everything is gone;
it is answered with one line saying what is still being cleaned. Signal handlers belong to the main
thread: elsewhere (a runner in a test's thread) both do nothing. EXIT_CODES: the shell's 128 + signal number.

A handler runs wherever the main thread is when the signal comes, a finalizer included (Popen.__del__ runs Python
code after every command), and an exception raised there is only printed ("Exception ignored in"): the run went on
as if no signal had come (CI 2026-12-02: SIGINT in a run's sampler start, exit 0 after 23 s). So an Interrupted a
finalizer swallowed is sent again (_resend) and its handler raises it once more. A signal that comes while _resend
itself runs (starting its thread waits, and a busy machine may take longer than RESEND_AFTER to wake: CI 2026-12-06)
is sent again too: raised in the hook it would be swallowed as well.
"""
from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time
from typing import Callable

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}   # SIGTERM ends as a shell says it did
RESEND_AFTER = 0.05   # s: late enough that the finalizer (and the hook) has returned when the signal comes again
_lost: list[str] = []   # the signals whose Interrupted a finalizer swallowed, sent again and not raised yet
_hooking = False        # _resend is running: an Interrupted raised now would be swallowed
_previous_hook = sys.unraisablehook


class Interrupted(Exception):
    """SIGINT or SIGTERM: stop, tear down, keep what was measured."""


def _raise(signum, frame):
    if not _in_hook(signum):
        raise Interrupted(signal.Signals(signum).name)


def _kill_later(signum: int) -> None:
    time.sleep(RESEND_AFTER)
    os.kill(os.getpid(), signum)


def _send_later(signum: int) -> None:
    # _thread, not threading.Timer: Timer.start() waits for its thread, and the signal could come in that wait
    _thread.start_new_thread(_kill_later, (signum,))


def _in_hook(signum: int) -> bool:
    """Whether _resend is running; then the signal is sent again, later, and its handler does nothing now."""
    if _hooking:
        _send_later(signum)
    return _hooking


def _resend(unraisable) -> None:
    """sys.unraisablehook: an Interrupted a finalizer swallowed is sent again from another thread, a moment later
    (raised in this hook it would be swallowed too); any other goes to the hook there was."""
    global _hooking
    if not isinstance(unraisable.exc_value, Interrupted):
        return _previous_hook(unraisable)
    _hooking = True
    try:
        name = str(unraisable.exc_value)
        _lost.append(name)
        _send_later(signal.Signals[name])
    finally:
        _hooking = False


def _hook_in() -> None:
    """_resend before the hook there is (pytest's, the interpreter's), once."""
    global _previous_hook
    if sys.unraisablehook is not _resend:
        _previous_hook, sys.unraisablehook = sys.unraisablehook, _resend


def _retaken(signum: int) -> bool:
    """Whether this signal is one sent again for a swallowed Interrupted (then it is raised whatever was raised)."""
    name = signal.Signals(signum).name
    if name in _lost:
        _lost.remove(name)
        return True
    return False


def _install(handler) -> dict | None:
    """Installs handler for SIGNALS; returns the handlers it replaced (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    _hook_in()
    return {s: signal.signal(s, handler) for s in SIGNALS}


def _restore(old: dict | None) -> None:
    for s, h in (old or {}).items():
        signal.signal(s, h)


def _say_cleaning(remaining: Callable[[], str] | None) -> None:
    left = remaining() if remaining is not None else ""
    sys.stderr.write(f"ccrig: still cleaning up{': ' + left if left else ''}; please wait\n")
    sys.stderr.flush()


def raise_on_interrupt() -> None:
    """Outside a run too, Ctrl-C and SIGTERM raise Interrupted: the command line's library (typer) turns a
    KeyboardInterrupt into a silent exit 130, and the researcher should read that it was interrupted; and
    SIGTERM's default ends the process where it is, past every finally that would remove what a command set up
    before its run traps signals itself (preflight's probe namespaces, a vm guest)."""
    if threading.current_thread() is threading.main_thread():
        _hook_in()
        for s in SIGNALS:
            signal.signal(s, _raise)


class blocked:
    """Within it, SIGINT and SIGTERM wait (blocked, not lost): a process forked here starts with them blocked,
    so one that arrives while the child is still in its bootstrap waits for the child's own handler (unblock),
    instead of meeting the parent's handler in code that cannot take it."""

    def __enter__(self):
        self.old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        return self

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self.old)
        return False


def unblock() -> None:
    """A forked child's SIGINT and SIGTERM go through again (blocked: its handlers are in place)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def ignore() -> None:
    """Everything is torn down and the process is on its way out: a late Ctrl-C must not turn the clean exit into
    a KeyboardInterrupt traceback and a death by SIGINT."""
    if threading.current_thread() is threading.main_thread():
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)


class trapped:
    """Within it, the first SIGINT or SIGTERM raises Interrupted; later ones are only said: the
    teardown the first one set off must not be cut short on its way into deferred()."""

    def __init__(self, remaining: Callable[[], str] | None = None):
        self.remaining, self.fired = remaining, False

    def __enter__(self):
        self.old = _install(self._raise_once)
        return self

    def _raise_once(self, signum, frame) -> None:
        if _in_hook(signum):
            return
        if self.fired and not _retaken(signum):
            _say_cleaning(self.remaining)
            return
        self.fired = True
        _raise(signum, frame)

    def __exit__(self, *exc):
        _restore(self.old)
        return False


class deferred:
    """Within it, SIGINT and SIGTERM are noted; the first is raised as Interrupted on leaving, unless another
    exception is already on its way. remaining() names what is still to tear down, said on each one."""

    def __init__(self, remaining: Callable[[], str] | None = None):
        self.remaining = remaining

    def __enter__(self):
        self.caught: list[int] = []
        self.old = _install(self._note)
        return self

    def _note(self, signum, frame) -> None:
        _retaken(signum)
        self.caught.append(signum)
        _say_cleaning(self.remaining)

    def __exit__(self, exc_type, *rest):
        _restore(self.old)
        if self.caught and exc_type is None:
            raise Interrupted(signal.Signals(self.caught[0]).name)
        return False
