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
