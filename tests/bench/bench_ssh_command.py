"""The hosts testbed's per-command cost over SSH: the first command (connection set-up) and the following ones
(multiplexed over the ControlMaster connection). Goal: well under 100 ms per command after the first.

Runs against the one-machine test bed (tests/support/sshhosts.py): one namespace with its own sshd; needs root.
"""
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package

from ccrig.commands import Commands  # noqa: E402
from ccrig.topologies.testbeds.hosts import Inventory, SshHost  # noqa: E402
from support.sshhosts import Host, SshHosts  # noqa: E402

N = 30


def run() -> dict:
    with SshHosts([Host("h1", ["senders"])]) as bed:
        inv = Inventory.load(bed.inventory, Commands())
        conn = SshHost(inv.hosts["h1"], Commands(), bed.dir)
        t0 = time.perf_counter()
        assert conn.open() == ""
        conn.run(["true"])
        first = time.perf_counter() - t0
        times = []
        for _ in range(N):
            t = time.perf_counter()
            conn.run(["true"])
            times.append(time.perf_counter() - t)
        conn.close()
    return {"first_command_s": first, "command_median_s": statistics.median(times),
            "command_p90_s": sorted(times)[int(0.9 * N)], "commands": N, "goal_command_s": 0.1,
            "note": "root through sudo -n, remote timeout wrapper included (what HostsTestbed.run does)"}


if __name__ == "__main__":
    print(run())
