"""ccrig.fanout.each: the results in the items' order, the calls side by side, every call ended before the first
error is raised."""
import os
import signal
import threading
import time

import pytest

from ccrig import fanout


def test_results_keep_the_items_order():
    assert fanout.each(lambda x: x * x, [3, 1, 2]) == [9, 1, 4]
    assert fanout.each(lambda x: x, []) == []


def test_calls_run_side_by_side():
    # four calls that each wait for all four to have started: one after another they would never meet
    barrier = threading.Barrier(4, timeout=10)
    assert fanout.each(lambda x: barrier.wait() is not None and x, range(4)) == [0, 1, 2, 3]


def test_the_first_error_is_raised_once_every_call_has_ended():
    ended = []

    def job(x):
        if x == 1:
            raise ValueError("one")
        if x == 2:
            raise KeyError("two")
        time.sleep(0.2)
        ended.append(x)
        return x
    with pytest.raises(ValueError, match="one"):
        fanout.each(job, [0, 1, 2, 3])
    assert sorted(ended) == [0, 3]


def test_at_once_bounds_the_calls_in_flight():
    lock, now, most = threading.Lock(), [0], [0]

    def job(_):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
    fanout.each(job, range(12), at_once=3)
    assert 2 <= most[0] <= 3


def test_an_interruption_starts_no_other_call():
    # the caller's thread interrupted while calls are under way (Ctrl-C): those end, the queued ones never start
    started, release = [], threading.Event()

    def job(x):
        started.append(x)
        release.wait(5)
        return x

    def interrupt():
        while len(started) < 2:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)   # a real signal: it wakes the caller's blocked wait
        time.sleep(0.2)
        release.set()
    # Python's own Ctrl-C handler for the test, whatever the suite was started with (a background job ignores SIGINT)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            fanout.each(job, range(10), at_once=2)
    finally:
        signal.signal(signal.SIGINT, before)
    assert sorted(started) == [0, 1]
