"""How each sender's kernel recovered its losses over a repetition: its own TCP counters (the SNMP MIB, one per
network namespace, read with `nstat`) before the traffic and after it. Timeouts, fast recoveries and retransmitted
segments are then the kernel's counts, not read off samples: Keshav's Generic recovers by its timer alone (study
003), and a timeout is what decides how its window comes back. On the hosts testbed a machine's MIB also counts
its SSH sessions' few retransmissions."""
from __future__ import annotations

from ccrig import fanout

# nstat's names -> summary.json's
COUNTERS = {"TcpExtTCPTimeouts": "timeouts", "TcpExtTCPSackRecovery": "sack_recoveries",
            "TcpExtTCPRenoRecovery": "reno_recoveries", "TcpExtTCPLossProbes": "loss_probes",
            "TcpRetransSegs": "retransmitted_segments"}


def read(testbed, nodes: list[str]) -> dict[str, dict[str, int]]:
    """Each node's counters now (absolute: -a; nstat's history neither read nor written: -s; zeros shown: -z).
    A node whose nstat fails has none: its repetition records no counts rather than wrong ones."""
    def one(node: str) -> dict[str, int]:
        r = testbed.run(node, ["nstat", "-asz", *COUNTERS], check=False)
        words = [line.split() for line in r.stdout.splitlines()] if r.returncode == 0 else []
        return {COUNTERS[w[0]]: int(w[1]) for w in words if len(w) >= 2 and w[0] in COUNTERS}
    # side by side: a command is half a second's process start in an emulated guest (ccrig/fanout.py)
    return dict(zip(nodes, fanout.each(one, nodes)))


def delta(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """What each node counted between two readings (a counter missing from either: left out)."""
    return {node: {k: v - before[node][k] for k, v in now.items() if k in before.get(node, {})}
            for node, now in after.items()}
