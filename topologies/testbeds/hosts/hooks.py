"""What the orchestration asks the hosts testbed beyond one run's topology (the hooks of topologies/testbed.py):
where a run loads its laws (the senders' hosts, for the whole run), and what killed runs left on the inventory's
hosts (`ccrig clean -i`). HostsTestbed takes them from HostsHooks."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import InputError
from ccrig.tcp_modules.leftovers import cleanup as laws_cleanup
from ccrig.tcp_modules.systems import RemoteSystem
from .clean import EVERY_RUN, clean_inventory, run_named
from .inventory import InventoryHost
from .ssh import NodeConnections, SshHost


class HostsHooks:
    @classmethod
    @contextmanager
    def law_systems(cls, nodes: list[str], commands: Commands, prefix: str):
        """{sender node: its host's System} over connections of their own, open for the with block: each flow's
        law is loaded on its sender's host, under that host's own name (iperf3's server only tries the sender's
        name on its socket and carries on without it; a receiver sends no data). A node no host plays, or a
        host that cannot be reached, is an input error naming them all."""
        conns = NodeConnections(list(nodes), commands, prefix)
        try:
            problems = conns.open()
            if problems:
                raise InputError("hosts testbed: " + "; ".join(problems))
            yield {n: RemoteSystem.of(conns.hosts[n], c) for n, c in conns.conns.items()}
        finally:
            conns.close()

    @classmethod
    def clean_everywhere(cls, commands: Commands, prefix: str, inventory: Path | None, alive) -> list[str]:
        """clean.clean_host on every experiment host of the inventory, then the congestion-control variants and
        modules the runs loaded there. A clean of every run (EVERY_RUN) touches only names made from a run's
        prefix and spares the runs still going (alive(run prefix)); a clean of one prefix, that run's alone."""
        if inventory is None:
            return []
        full = prefix == EVERY_RUN

        def laws(host: InventoryHost, conn: SshHost) -> list[str]:
            return laws_cleanup(RemoteSystem.of(host, conn), None if full else prefix.rstrip("-"),
                                keep=alive if full else None)
        return clean_inventory(inventory, prefix, commands, keep=alive if full else None,
                               ours=run_named if full else None, each=laws)

    def machine(self, node: str) -> str | None:
        """The host that plays node, once the testbed has mapped it (preflight or up)."""
        hosts = getattr(self, "hosts", {})
        return hosts[node].where if node in hosts else None
