"""Waiting on readiness, not on time: a test polls for the state it needs (a port listening, a file written, a
counter moved) with a deadline long enough for a busy 2-core machine, and fails naming what never happened."""
from __future__ import annotations

import time


def until(check, timeout: float = 10.0, what: str = "the condition", every: float = 0.02):
    """Polls check() until it returns something truthy and returns that; fails the test after timeout seconds,
    naming what it waited for and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; last seen: {value!r}")
        time.sleep(every)


def listening(run, port: int, timeout: float = 10.0) -> None:
    """Waits until a TCP socket listens on port where run(argv) runs commands (a testbed node:
    `lambda argv: bed.run(node, argv, check=False)`)."""
    until(lambda: run(["ss", "-Hltn", f"( sport = :{port} )"]).stdout.strip(), timeout,
          f"a listener on TCP port {port}")
