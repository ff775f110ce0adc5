"""`ccrig clean`: removes what a killed run may have left, found by ccrig's name prefix."""
from __future__ import annotations

import json
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


def clean_all(prefix: str = "ccrig-", stop_prometheus: bool = False,
              prometheus_root: Path = Path("results/prometheus")) -> list[str]:
    commands = Commands(None)
    said = []
    for ns in namespaces(prefix):
        # a namespace of a run that is still going belongs to it: ccrig-<pid>-node
        pid = ns.removeprefix("ccrig-").split("-")[0]
        if prefix == "ccrig-" and pid.isdigit() and _alive(int(pid)) and int(pid) != os.getpid():
            said.append(f"kept namespace {ns}: its run (pid {pid}) is still going")
            continue
        remove_namespace(ns, commands)
        said.append(f"removed namespace {ns} and its processes")
    try:
        from tcp_modules.manager import cleanup as cc_cleanup
    except ImportError:
        cc_cleanup = None
    # congestion-control variants carry no run prefix: only a full clean removes them
    if cc_cleanup is not None and prefix == "ccrig-":
        for line in cc_cleanup(commands) or []:
            said.append(line)
    server = PrometheusServer(prometheus_root, commands)
    for target in server.targets_dir.glob("*/*.json") if server.targets_dir.exists() else []:
        pid = target.stem.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            target.unlink(missing_ok=True)
            said.append(f"removed stale Prometheus target {target.name}")
    if stop_prometheus and server.stop():
        said.append("stopped the local Prometheus server")
    return said or ["nothing to clean"]
