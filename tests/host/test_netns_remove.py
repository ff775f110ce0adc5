"""Removing a namespace leaves no process in it, even one that enters while it is being removed (an orphan of a
killed run finishing its `ip netns exec`): such a process would keep the namespace alive unnamed, out of every
later `ccrig clean`'s sight (seen after a fleet member was killed mid-run: an iperf3 server alive for two hours in
a namespace without a name)."""
import os
import subprocess
import time

from ccrig.commands import Commands
from ccrig.topologies.testbeds.netns import NETNS_DIR, remove_namespace


def test_a_process_entering_during_removal_goes_with_the_namespace():
    ns = f"ccrig-t{os.getpid()}-rm"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    inode = os.stat(NETNS_DIR / ns).st_ino
    # processes keep entering it from outside, as a dying run's children would, until its name is gone
    spawner = subprocess.Popen(["sh", "-c", f"while ip netns exec {ns} sleep 600 & sleep 0.002; do :; done"],
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _inside(inode):
            time.sleep(0.02)
        assert _inside(inode), "the spawner never entered the namespace"
        remove_namespace(ns, Commands(None))
    finally:
        os.killpg(spawner.pid, 9)
        spawner.wait()
    left = _inside(inode)
    for pid in left:   # not left behind by the test either
        os.kill(pid, 9)
    assert not (NETNS_DIR / ns).exists()
    assert left == [], "a process is left in the removed namespace"


def _inside(inode: int) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino == inode:
                out.append(int(pid))
        except OSError:
            pass
    return out
