"""Threads whose join() a Ctrl-C cannot fool.

Python 3.11's Thread.join, when a signal handler raises inside it (signals.trapped raises Interrupted), takes the
thread for ended though it still runs: bpo-45274's mend releases the lock the running thread holds. The next join()
returns at once and is_alive() says False. A teardown that joined a reader again and then closed the reader's file
closed it under the reader (CI 2026-11-28: EBADF in a sampler's thread after a Ctrl-C, printed as a traceback).
These threads say they ended through an Event set as their target returns, which an interrupted wait leaves alone.

    t = Thread(target, args, name=...)   # a daemon thread, started
    t.join(timeout)                      # returns when the target has returned, or after timeout
    t.ended.is_set()                     # whether it has (what to ask before closing what it reads)
"""
from __future__ import annotations

import threading
from typing import Callable


class Thread(threading.Thread):
    def __init__(self, target: Callable, args: tuple = (), name: str | None = None):
        super().__init__(target=target, args=args, name=name, daemon=True)
        self.ended = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.ended.set()

    def join(self, timeout: float | None = None) -> None:
        self.ended.wait(timeout)

    def is_alive(self) -> bool:
        return not self.ended.is_set()
