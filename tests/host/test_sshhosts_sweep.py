"""A test bed whose test process was killed before its teardown is removed by the next bed's start: its sshd and
namespaces, its users, its sudoers file, its bridge and its folder (tests/support/sshhosts.py). A CI run stopped by
its time limit left them on the machine."""
import os
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ccrig.commands import Commands
from support.sshhosts import (Host, SshHosts, _base, _users, alive_tags, killed_beds, sweep_killed_beds,
                              sweep_lock)

# SSH test beds add users and sudoers files: useradd refuses while another holds /etc/passwd's lock
pytestmark = pytest.mark.xdist_group("sshhosts")


def _dead_pid() -> int:
    """A pid (mod 100000) that no running process has: a process that ran and ended."""
    while True:
        p = subprocess.Popen(["true"])
        p.wait()
        if p.pid % 100000 not in alive_tags():
            return p.pid % 100000


def _left(prefix: str, bed: SshHosts) -> list[str]:
    return ([n for n in os.listdir("/run/netns") if n.startswith(prefix)] + [u for u in _users() if u in bed.users]
            + [str(p) for p in (bed.sudoers, bed.dir, Path("/sys/class/net") / bed.bridge) if p.exists()])


def test_a_killed_processs_bed_is_swept_by_the_next_start_and_a_live_one_kept():
    dead = SshHosts([Host("h1", ["senders"])], prefix=f"{_base()}{_dead_pid()}zz")   # as if its test was killed
    live = None
    try:
        with sweep_lock():   # no other worker's bed start sweeps it half built; once built, any start may
            dead._up()
            assert dead.prefix in killed_beds()
        live = SshHosts([Host("h1", ["senders"])]).up()   # this process's own: its pid is running
        assert _left(dead.prefix, dead) == []   # swept by the live one's start
        assert live.prefix not in killed_beds() and sweep_killed_beds(Commands()) == []
        assert _left(live.prefix, live) != [] and live.sshd["h1"].poll() is None   # untouched, its sshd up
    finally:
        for bed in (live, dead):
            if bed is not None:
                bed.down()


def test_two_beds_started_at_once_get_subnets_and_users_of_their_own(monkeypatch):
    # beds of two xdist workers start at once: each must pick a management subnet no other bed has (two picked
    # 198.19.200 in CI, and one's ssh reached the other's host) and add its users while no other holds passwd.
    # The race made certain: each bed, its subnet picked, waits (up to 3 s) for the other to have picked one too
    picked, free = threading.Barrier(2), SshHosts._free_subnet

    def slow_free_subnet(self):
        subnet = free(self)
        try:
            picked.wait(timeout=3)
        except threading.BrokenBarrierError:   # the other waits for the lock this one holds: as it should
            pass
        return subnet

    monkeypatch.setattr(SshHosts, "_free_subnet", slow_free_subnet)
    beds = [SshHosts([Host("h1", ["senders"])]) for _ in range(2)]
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(SshHosts.up, beds))
        assert beds[0].subnet != beds[1].subnet
        for bed in beds:   # each one's host answers over SSH with the key and host key of its own bed
            h = bed.hosts["h1"]
            r = subprocess.run(["ssh", "-i", str(bed.key), "-o", f"UserKnownHostsFile={bed.known_hosts}",
                                "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                                "-o", "ConnectTimeout=10", f"{bed.operator}@{h.address}", "hostname"],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
    finally:
        for bed in beds:
            bed.down()
