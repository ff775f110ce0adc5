"""`ccrig clean`: removes what a killed run may have left, found by ccrig's name prefix.

With an inventory (`ccrig clean -i INVENTORY`) it also reaches the experiment hosts over SSH and removes what
hosts runs left there (topologies.testbeds.hosts.clean_host, tcp_modules.manager.cleanup on each host's system).
"""
from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

from ccrig.commands import Commands
from ccrig.tcp_modules.manager import cleanup as cc_cleanup
from ccrig.topologies import testbeds
from .prometheus_server import PrometheusServer

# the SSH control directories of the hosts testbed and of its congestion-control connections:
# <run prefix>-ssh-XXXXXXXX and <run prefix>-ssh-cc-XXXXXXXX (tempfile.mkdtemp's eight characters)
SSH_DIR = re.compile(r"^(?P<run>.+)-ssh-(?:cc-)?[a-z0-9_]{8}$")


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


def _is_run(name: str) -> bool:
    """A name made from a `ccrig run` prefix (ccrig-<pid>-...), as a full clean requires."""
    return re.match(r"^ccrig-\d+-", name) is not None


def clean_all(prefix: str = "ccrig-", stop_prometheus: bool = False,
              prometheus_root: Path = Path("results/prometheus"), inventory: Path | None = None) -> list[str]:
    commands = Commands(None)
    said = []
    # a full clean spares what belongs to runs still going (ccrig-<pid>-...)
    full = prefix == "ccrig-"
    said += close_ssh_connections(prefix, commands)
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


def close_ssh_connections(prefix: str, commands: Commands) -> list[str]:
    """Ends the SSH master connections a killed hosts run left on this machine (they outlive it: each runs in
    a session of its own) and removes their control directories."""
    said = []
    for d in sorted(Path(tempfile.gettempdir()).glob(f"{prefix}*")):
        m = SSH_DIR.match(d.name)
        # the run's prefix with its dash starts with ours (so --prefix ccrig-PID- finds ccrig-PID-ssh-...)
        if m is None or not f"{m.group('run')}-".startswith(prefix) or not d.is_dir() or d.is_symlink():
            continue
        if prefix == "ccrig-" and (not _is_run(d.name) or _run_alive(m.group("run"))):
            continue
        for sock in sorted(d.iterdir()):
            if sock.suffix == ".sock" and stat.S_ISSOCK(sock.lstat().st_mode):
                if commands.ok(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", sock.stem], timeout=10):
                    said.append(f"closed the SSH connection to host {sock.stem} left by {m.group('run')}")
                sock.unlink(missing_ok=True)
        try:
            d.rmdir()
            said.append(f"removed {d}")
        except OSError:
            pass
    return said


def clean_hosts(inventory: Path, prefix: str, commands: Commands) -> list[str]:
    """On every experiment host of the inventory (groups senders, receivers, routers): the processes, remote
    directories, experiment addresses, routes and root qdiscs hosts runs left (topologies.testbeds.hosts.clean_host),
    then their congestion-control variants and modules. A host that cannot be reached is said, not fatal."""
    from ccrig.tcp_modules.manager import RemoteSystem, cleanup as cc_cleanup
    from ccrig.topologies.testbeds.hosts import Inventory, clean_host, connect_all
    inv = Inventory.load(inventory, commands, arg="--inventory")
    hosts = [h for h in inv.experiment_hosts() if not h.local]
    if not hosts:
        return [f"{inventory}: no experiment hosts (groups senders, receivers, routers) to clean"]
    full = prefix == "ccrig-"
    said = []
    control = Path(tempfile.mkdtemp(prefix=f"ccrig-{os.getpid()}-clean-"))
    conns = {}
    try:
        conns, problems = connect_all(hosts, commands, control)
        said += [f"could not clean {p}" for p in problems]
        for h in hosts:
            if any(p.startswith(h.where) for p in problems):
                continue
            conn = conns[h.name]
            said += clean_host(conn, prefix, keep=_run_alive if full else None,
                               ours=_is_run if full else None)
            said += cc_cleanup(RemoteSystem.of(h, conn), None if full else prefix.rstrip("-"),
                               keep=(lambda owner: _run_alive(owner)) if full else None)
    finally:
        for conn in conns.values():
            conn.close()
        for f in control.glob("*"):
            f.unlink(missing_ok=True)
        control.rmdir()
    return said
