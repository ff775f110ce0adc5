"""ccrig/procs.py on real processes: a group is stopped whole, its leader and every member."""
import subprocess
import time

from ccrig.procs import group_members, stop_group


def test_a_group_whose_leader_ends_first_is_stopped_whole():
    # the leader ends at SIGTERM at once; a member shrugs it off (as a guest's qemu may take its time): stop_group
    # returns only when the member is gone too, SIGKILLed after the grace
    proc = subprocess.Popen(["sh", "-c", "(trap '' TERM; echo up; sleep 60) & wait"], stdout=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout.readline() == b"up\n"   # the member is running and ignores TERM from here on
    assert len(group_members(proc.pid)) >= 2
    started = time.monotonic()
    stop_group(proc, grace=0.5)
    assert group_members(proc.pid) == [] and proc.returncode is not None
    assert time.monotonic() - started < 30


def test_a_group_already_gone_returns_at_once():
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    stop_group(proc)
    assert group_members(proc.pid) == []


def test_a_process_says_where_it_waits_and_nothing_once_it_has_ended():
    from ccrig.procs import waiting_in
    sleeper = subprocess.Popen(["sleep", "60"])
    spinner = subprocess.Popen(["python3", "-c", "print('up', flush=True)\nwhile 1: pass"], stdout=subprocess.PIPE)
    try:
        # its kernel stack's innermost frames (root reads them), or its wchan: a sleep waits on a timer
        until = time.monotonic() + 30
        while not (said := waiting_in(sleeper.pid) or "").startswith("sleep S in ") and time.monotonic() < until:
            time.sleep(0.05)   # until it has exec'd and sleeps
        assert said.startswith("sleep S in ") and "sleep" in said.split(" in ", 1)[1], said
        assert spinner.stdout.readline() == b"up\n"   # started, and spinning from here on: runnable, never asleep
        assert waiting_in(spinner.pid).split()[:2] == ["python3", "R"], waiting_in(spinner.pid)
    finally:
        for p in (sleeper, spinner):
            p.kill()
            p.wait()
    assert waiting_in(sleeper.pid) is None


def test_a_process_in_select_says_whether_a_timer_can_wake_it():
    """A select with no timeout waits on its descriptors alone: a held client with no timer left says so."""
    from ccrig.procs import waiting_in
    code = "import os, select; r, w = os.pipe(); print('up', flush=True); select.select([r], [], [], {})"
    procs = [subprocess.Popen(["python3", "-c", code.format(t)], stdout=subprocess.PIPE) for t in ("None", "600")]
    try:
        said = []
        for p in procs:
            assert p.stdout.readline() == b"up\n"
            until = time.monotonic() + 30
            while "select" not in (s := waiting_in(p.pid) or "") and time.monotonic() < until:
                time.sleep(0.05)   # until it is in the call
            said.append(s)
        assert said[0].endswith(" with no timeout") and said[1].endswith(" with a timeout"), said
        assert said[0].split(", ")[-1] in ("select with no timeout", "pselect6 with no timeout"), said
    finally:
        for p in procs:
            p.kill()
            p.wait()
