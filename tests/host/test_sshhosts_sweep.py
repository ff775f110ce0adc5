"""A test bed whose test process was killed before its teardown is removed by the next bed's start: its sshd and
namespaces, its users, its sudoers file, its bridge and its folder (tests/support/sshhosts.py). A CI run stopped by
its time limit left them on the machine."""
import os
import subprocess
from pathlib import Path

import pytest

from ccrig.commands import Commands
from support.sshhosts import Host, SshHosts, _base, _users, alive_tags, killed_beds, sweep_killed_beds

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
    dead = SshHosts([Host("h1", ["senders"])], prefix=f"{_base()}{_dead_pid()}z").up()   # as if its test was killed
    live = None
    try:
        assert dead.prefix in killed_beds()
        live = SshHosts([Host("h1", ["senders"])]).up()   # this process's own: its pid is running
        assert _left(dead.prefix, dead) == []   # swept by the live one's start
        assert live.prefix not in killed_beds() and sweep_killed_beds(Commands()) == []
        assert _left(live.prefix, live) != [] and live.sshd["h1"].poll() is None   # untouched, its sshd up
    finally:
        for bed in (live, dead):
            if bed is not None:
                bed.down()
