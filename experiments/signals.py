"""Ctrl-C and SIGTERM during a run: the run stops, tears everything down and keeps what it measured.

While a run goes, SIGINT and SIGTERM raise Interrupted where the run is (trapped). While it tears down, they are
only noted (deferred): a second Ctrl-C must not cut the teardown short, so it is raised once everything is gone.
Signal handlers belong to the main thread: elsewhere (a runner in a test's thread) both do nothing.
"""
from __future__ import annotations

import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """SIGINT or SIGTERM: stop, tear down, keep what was measured."""


def _raise(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def _install(handler) -> dict | None:
    """Installs handler for SIGNALS; returns the handlers it replaced (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return {s: signal.signal(s, handler) for s in SIGNALS}


def _restore(old: dict | None) -> None:
    for s, h in (old or {}).items():
        signal.signal(s, h)


class trapped:
    """Within it, SIGINT and SIGTERM raise Interrupted."""

    def __enter__(self):
        self.old = _install(_raise)
        return self

    def __exit__(self, *exc):
        _restore(self.old)
        return False


class deferred:
    """Within it, SIGINT and SIGTERM are noted; the first is raised as Interrupted on leaving, unless another
    exception is already on its way."""

    def __enter__(self):
        self.caught: list[int] = []
        self.old = _install(lambda n, f: self.caught.append(n))
        return self

    def __exit__(self, exc_type, *rest):
        _restore(self.old)
        if self.caught and exc_type is None:
            raise Interrupted(signal.Signals(self.caught[0]).name)
        return False
