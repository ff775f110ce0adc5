"""`ccrig clean`: removes what a killed run may have left, found by ccrig's name prefix.

Each testbed removes its own leftovers: on this machine (Testbed.clean), and with an inventory (`ccrig clean -i
INVENTORY`) on the other machines it uses (Testbed.clean_everywhere: the hosts' processes, settings and laws).
"""
from __future__ import annotations

import os
from pathlib import Path

from ccrig.commands import Commands
from ccrig.tcp_modules.manager import cleanup as cc_cleanup
from ccrig.topologies import testbeds
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
        for bed in testbeds.available().values():
            said += bed.clean_everywhere(commands, prefix, inventory, _run_alive)
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

