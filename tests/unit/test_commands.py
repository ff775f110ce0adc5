"""The one command runner: a background process keeps the caller's priority across the new session it gets."""
import subprocess
import sys
from pathlib import Path

AUTOGROUP = Path("/proc/self/autogroup")
CHILD = """
import os
from ccrig.commands import Commands
os.nice(7 - os.getpriority(os.PRIO_PROCESS, 0))   # 7 whatever the caller's nice (`nice make test`)
p = Commands(None).popen(["sleep", "30"])
try:
    if not os.path.exists("/proc/self/autogroup"):   # a kernel without CONFIG_SCHED_AUTOGROUP: nice is enough
        print(os.getpriority(os.PRIO_PROCESS, p.pid), "-", "+")
        raise SystemExit
    # A process in pid 1's session (a CI runner that never called setsid) is in the root group, whose file is empty.
    group = lambda pid: (open(f"/proc/{pid}/autogroup").read().split() or ["root", "nice", "0"])
    print(group(p.pid)[-1], group("self")[0], group(p.pid)[0])
finally:
    p.kill()
    p.wait()
"""


def test_a_background_process_keeps_the_callers_nice_in_its_own_session():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True).stdout
    nice, mine, its = out.split()
    assert its != mine, "the background process should be in a session (autogroup) of its own"
    assert nice == "7"
