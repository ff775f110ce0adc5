"""`ccrig clean`: removes what a killed run may have left, found by ccrig's name prefix.

With an inventory (`ccrig clean -i INVENTORY`) it also reaches the experiment hosts over SSH and removes what
hosts runs left there (topologies.testbeds.hosts.clean_inventory, tcp_modules.manager.cleanup on each host's
system). The SSH masters killed hosts runs left on this machine go with the hosts testbed's own clean().
"""
from __future__ import annotations

import os
from pathlib import Path

from ccrig.commands import Commands
from ccrig.tcp_modules.manager import RemoteSystem, cleanup as cc_cleanup
from ccrig.topologies import testbeds
from ccrig.topologies.testbeds.hosts import clean_inventory, run_named
from ccrig.experiments.telemetry.prometheus_server import PrometheusServer


def _alive(pid: int) -> bool:
    """Is pid a running ccrig? (a pid reused by another program does not count)"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"ccrig" in cmdline or b"experiments.cli" in cmdline


def _run_alive(prefix: str) -> bool:
    pid = prefix.removeprefix("ccrig-").split("-")[0]
    return pid.isdigit() and _alive(int(pid))


def clean_all(prefix: str = "ccrig-", stop_prometheus: bool = False,
              prometheus_root: Path = Path("results/prometheus"), inventory: Path | None = None) -> list[str]:
    commands = Commands(None)
    said = []
    # a full clean spares what belongs to runs still going (ccrig-<pid>-...)
    full = prefix == "ccrig-"
    if inventory is not None:
        said += clean_hosts(inventory, prefix, commands)
    # what belongs to a run still going (ccrig-<pid>-...) is spared by a full clean
    keep = (lambda name: full and _run_alive(name) and not name.startswith(f"ccrig-{os.getpid()}-"))
    for kind, bed in testbeds.available().items():
        said += bed.clean(commands, prefix, keep)
    # variants are recorded with their run's prefix (ccrig-<pid>); a full clean spares runs still going
    if full:
        said += cc_cleanup(commands, None, keep=lambda owner: _run_alive(owner)) or []
    else:
        said += cc_cleanup(commands, prefix.rstrip("-")) or []
    server = PrometheusServer(prometheus_root, commands)
    for target in server.targets_dir.glob("*/*.json") if server.targets_dir.exists() else []:
        pid = target.stem.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            target.unlink(missing_ok=True)
            said.append(f"removed stale Prometheus target {target.name}")
    if stop_prometheus and server.stop():
        said.append("stopped the local Prometheus server")
    return said or ["nothing to clean"]


def clean_hosts(inventory: Path, prefix: str, commands: Commands) -> list[str]:
    """On every experiment host of the inventory (groups senders, receivers, routers): the processes, remote
    directories, settings, experiment addresses, routes and root qdiscs hosts runs left
    (topologies.testbeds.hosts.clean_host), then their congestion-control variants and modules. A host that
    cannot be reached is said, not fatal."""
    full = prefix == "ccrig-"

    def laws(host, conn) -> list[str]:
        return cc_cleanup(RemoteSystem.of(host, conn), None if full else prefix.rstrip("-"),
                          keep=_run_alive if full else None)
    return clean_inventory(inventory, prefix, commands, keep=_run_alive if full else None,
                           ours=run_named if full else None, each=laws)
