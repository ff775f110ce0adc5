"""ccrig/threads.py: a join interrupted by a raising signal handler (a Ctrl-C in a run) leaves the thread known
as running, so the teardown's second join waits for it before closing what it reads."""
import signal
import threading
import time

from ccrig.threads import Thread


class Interrupted(Exception):
    pass


def _raise(*_):
    raise Interrupted()


def test_an_interrupted_join_does_not_take_a_running_thread_for_ended():
    release = threading.Event()
    t = Thread(release.wait, (30,), name="test-threads")
    old = signal.signal(signal.SIGALRM, _raise)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            t.join(30)
            raise AssertionError("the signal did not interrupt the join")
        except Interrupted:
            pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    # the stdlib's Thread (3.11) answers False here and its next join returns at once
    assert t.is_alive() and not t.ended.is_set()
    t.join(0.3)
    assert t.is_alive(), "join returned a still running thread as ended"
    threading.Timer(0.2, release.set).start()
    started = time.monotonic()
    t.join(30)
    assert t.ended.is_set() and not t.is_alive() and time.monotonic() - started < 25


def test_a_thread_whose_target_raises_still_ends(monkeypatch):
    said = threading.Event()   # the exception still reaches threading.excepthook, as a stdlib thread's does
    monkeypatch.setattr(threading, "excepthook", lambda args: said.set())

    def fail():
        raise ValueError("x")
    t = Thread(fail, name="test-threads-raise")
    t.join(30)
    assert t.ended.is_set() and said.wait(30)
