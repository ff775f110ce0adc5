"""`ccrig clean`: removes what a killed run may have left, found by ccrig's name prefix."""
from __future__ import annotations

import os
from pathlib import Path

from topologies.netns import namespaces, remove_namespace
from .commands import Commands
from .prometheus_server import PrometheusServer


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
              prometheus_root: Path = Path("results/prometheus")) -> list[str]:
    commands = Commands(None)
    said = []
    for ns in namespaces(prefix):
        # a namespace of a run that is still going belongs to it: ccrig-<pid>-node
        if prefix == "ccrig-" and _run_alive(ns) and not ns.startswith(f"ccrig-{os.getpid()}-"):
            said.append(f"kept namespace {ns}: its run is still going")
            continue
        remove_namespace(ns, commands)
        said.append(f"removed namespace {ns} and its processes")
    try:
        from tcp_modules.manager import cleanup as cc_cleanup
    except ImportError:
        cc_cleanup = None
    if cc_cleanup is not None:
        # variants are recorded with their run's prefix (ccrig-<pid>); a full clean spares runs still going
        if prefix == "ccrig-":
            said += cc_cleanup(commands, None, keep=lambda owner: _run_alive(owner)) or []
        else:
            said += cc_cleanup(commands, prefix.rstrip("-")) or []
    from topologies import vm
    said += vm.stop_stray_guests(prefix, keep=lambda name: prefix == "ccrig-" and _run_alive(name))
    try:
        from topologies.mininet import cleanup as mininet_cleanup
    except ImportError:
        mininet_cleanup = None
    if mininet_cleanup is not None:
        said += mininet_cleanup(commands, prefix) or []
    server = PrometheusServer(prometheus_root, commands)
    for target in server.targets_dir.glob("*/*.json") if server.targets_dir.exists() else []:
        pid = target.stem.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            target.unlink(missing_ok=True)
            said.append(f"removed stale Prometheus target {target.name}")
    if stop_prometheus and server.stop():
        said.append("stopped the local Prometheus server")
    return said or ["nothing to clean"]
