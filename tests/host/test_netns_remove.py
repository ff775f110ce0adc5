"""Removing a namespace leaves no process in it, even one that enters while it is being removed (an orphan of a
killed run finishing its `ip netns exec`): such a process would keep the namespace alive unnamed, out of every
later `ccrig clean`'s sight (seen after a fleet member was killed mid-run: an iperf3 server alive for two hours in
a namespace without a name)."""
import os
import subprocess
import time

from conftest import CCRIG, ROOT

from ccrig.commands import Commands
from ccrig.topologies.testbeds.netns import NETNS_DIR, remove_namespace, remove_namespaces


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


def test_a_process_whose_namespace_lost_its_name_is_found_by_clean_and_by_a_removal():
    # CI on 2026-12-07: after the fleet tests an iperf3 server of a powered-off member lived on in a namespace without
    # a name, though `ccrig clean --prefix` had run: it had entered after every pass of the removal. Its state is made
    # here directly: a process started into a namespace (as a run starts its servers), then the name deleted under it
    prefix = f"ccrig-t{os.getpid()}-tag"
    procs = []
    try:
        for node in ("h1", "h2"):
            ns = f"{prefix}-{node}"
            subprocess.run(["ip", "netns", "add", ns], check=True)
            inode = os.stat(NETNS_DIR / ns).st_ino
            procs.append(p := Commands(None).popen(["sleep", "600"], ns=ns))
            deadline = time.monotonic() + 20   # ready: `ip netns exec` has entered and exec'd sleep
            while time.monotonic() < deadline and not (p.pid in _inside(inode) and _comm(p.pid) == "sleep"):
                time.sleep(0.02)
            assert p.pid in _inside(inode) and _comm(p.pid) == "sleep", "the process never started in its namespace"
            subprocess.run(["ip", "netns", "delete", ns], check=True)
            assert p.poll() is None, "deleting the name stopped the process"
        # a removal by name (a pair's own teardown) finds h1's by its tag
        remove_namespace(f"{prefix}-h1", Commands(None))
        assert procs[0].wait(timeout=30) is not None
        assert procs[1].poll() is None, "a removal of h1 stopped h2's process"
        # `ccrig clean --prefix` finds h2's, though no namespace of the prefix has a name
        out = subprocess.run([*CCRIG, "clean", "--prefix", prefix], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert procs[1].wait(timeout=30) is not None
        assert f"namespace {prefix}-h2, which has no name left" in out.stdout, out.stdout
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()


def test_a_namespace_made_beside_a_removal_keeps_its_processes():
    # study 001 run I: a pair's teardown freed its namespaces, the kernel gave one's inode number to a namespace
    # another pair was making that moment, and the teardown's last pass, matching by that number, SIGTERMed the
    # other pair's `ip -batch`. Here the other pair's namespace is made, and a process started in it, right after
    # the deletion and before that last pass (the real commands, run at that point)
    gone, new = f"ccrig-t{os.getpid()}-gone", f"ccrig-t{os.getpid()}-new"
    subprocess.run(["ip", "netns", "add", gone], check=True)
    gone_inode = os.stat(NETNS_DIR / gone).st_ino
    beside: list[subprocess.Popen] = []
    reused: list[bool] = []

    class Beside(Commands):
        def batch(self, argv, lines, ns=None, timeout=60):
            super().batch(argv, lines, ns, timeout)
            if not beside:
                # the number comes free once the kernel has destroyed the namespace, a moment later: namespaces are
                # made (and dropped) until one gets it or 5 s pass, as pairs beside would
                deadline = time.monotonic() + 5
                while True:
                    subprocess.run(["ip", "netns", "add", new], check=True)
                    inode = os.stat(NETNS_DIR / new).st_ino
                    if inode == gone_inode or time.monotonic() > deadline:
                        break
                    subprocess.run(["ip", "netns", "delete", new], check=True)
                reused.append(inode == gone_inode)
                beside.append(subprocess.Popen(["ip", "netns", "exec", new, "sleep", "600"], start_new_session=True))
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and beside[0].pid not in _inside(inode):
                    time.sleep(0.02)

    try:
        remove_namespaces([gone], Beside(None))
        assert beside, "the deletion never ran"
        assert not (NETNS_DIR / gone).exists()
        assert beside[0].poll() is None, f"the process in the namespace made beside was stopped ({beside[0].poll()})"
        assert reused == [False], "the removed namespace's number went to another while it was being removed"
    finally:   # nothing left behind, whether the process lived or not
        for p in beside:
            if p.poll() is None:
                os.killpg(p.pid, 9)
            p.wait()
        subprocess.run(["ip", "netns", "delete", new], check=False)


def _comm(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""


def _inside(inode: int) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino == inode:
                out.append(int(pid))
        except OSError:
            pass
    return out
