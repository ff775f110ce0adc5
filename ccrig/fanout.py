"""One small job per node, side by side: the per-node commands of a set-up or a teardown (a route, a description,
a check) are independent, and one after another they add up: each is a process start (ip netns exec, mnexec, ssh)
that costs half a second in an emulated guest, where an 8-pair dumbbell's 48 route commands took 24 s in a row."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# at most this many at once: enough to keep two to eight cores or a handful of ssh connections busy, few enough
# that a 100-flow run does not start 200 processes in one instant
AT_ONCE = 8


def each(fn: Callable[[T], R], items: Iterable[T], at_once: int = AT_ONCE) -> list[R]:
    """fn(item) for every item, up to at_once of them at a time; the results in items' order. Every call ends
    before this returns; then the first exception (in items' order) is raised, so nothing is left running. An
    exception here (Ctrl-C, SIGTERM) lets the calls under way end and starts no other."""
    items = list(items)
    if len(items) < 2 or at_once < 2:
        return [fn(i) for i in items]
    pool = ThreadPoolExecutor(max_workers=min(at_once, len(items)))
    try:
        futures = [pool.submit(fn, i) for i in items]
        wait(futures)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [f.result() for f in futures]
