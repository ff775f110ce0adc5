"""What killed hosts runs left, and its removal: their SSH masters on this machine (`ccrig clean`), and with an
inventory (`ccrig clean -i`) on each experiment host their processes, run directories, the settings each run
recorded in its undo.sh there, and any experiment addresses, routes and root qdiscs still on the mapped
interfaces."""
from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path

from ccrig.commands import Commands
from .inventory import Inventory, InventoryHost
from .ssh import SshHost, close_all, connect_all
from .undo import UNDO_SCRIPT

# the SSH control directories of the hosts testbed and of the runner's congestion-control connections:
# <run prefix>-ssh-XXXXXXXX and <run prefix>-ssh-cc-XXXXXXXX (tempfile.mkdtemp's eight characters)
SSH_DIR = re.compile(r"^(?P<run>.+)-ssh-(?:cc-)?[a-z0-9_]{8}$")
CLEAN_CONNECT_S = 60.0  # each host's login, in parallel (a run's start allows 15 s: ssh.SshHost.open)
EVERY_RUN = "ccrig-"  # the prefix of a clean of every run: it touches only names made from a run's prefix

# Ends the processes whose pid files are in the given run directories (POPEN_WRAPPER writes them), as root on
# the host. A pid file is written just after its process started: a process that started at another time is
# not the one it names (the pid was reused, or the file is not ours) and is left alone. Prints "pid command"
# for each process it stopped.
KILL_PIDFILES = r"""
import glob, os, signal, sys, time
btime = next(int(l.split()[1]) for l in open("/proc/stat") if l.startswith("btime"))
hz = os.sysconf("SC_CLK_TCK")
found = []
def alive(pid):  # a zombie (already ended, not yet reaped) has an empty command line
    try:
        return bool(open(f"/proc/{pid}/cmdline", "rb").read())
    except OSError:
        return False
for d in sys.argv[1:]:
    for f in sorted(glob.glob(os.path.join(d, "p*.pid"))):
        try:
            pid, written = int(open(f).read().split()[0]), os.stat(f).st_mtime
            started = btime + int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]) / hz
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue
        if pid > 1 and written - 10 <= started <= written + 2:
            found.append((pid, cmd))
for sig in (signal.SIGTERM, signal.SIGKILL):
    for pid, _ in found:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.time() + 2
    while time.time() < deadline and any(alive(p) for p, _ in found):
        time.sleep(0.05)
for pid, cmd in found:
    print(pid, cmd)
"""


def run_named(name: str) -> bool:
    """A name made from a `ccrig run` prefix (ccrig-<pid>-...), as a clean of every run requires."""
    return re.match(r"^ccrig-\d+-", name) is not None


def close_ssh_connections(prefix: str, commands: Commands, keep) -> list[str]:
    """Ends the SSH master connections killed hosts runs left on this machine (they outlive them: each runs in
    a session of its own) and removes their control directories; keep(run prefix) spares a run still going."""
    said = []
    for d in sorted(Path(tempfile.gettempdir()).glob(f"{prefix}*")):
        m = SSH_DIR.match(d.name)
        # the run's prefix with its dash starts with ours (so --prefix ccrig-PID- finds ccrig-PID-ssh-...)
        if m is None or not f"{m.group('run')}-".startswith(prefix) or not d.is_dir() or d.is_symlink():
            continue
        if (prefix == EVERY_RUN and not run_named(d.name)) or keep(m.group("run")):
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


def clean_inventory(inventory: Path, prefix: str, commands: Commands, keep=None, ours=None,
                    each=None) -> list[str]:
    """clean_host on every experiment host of the inventory (groups senders, receivers, routers), then
    each(host, conn) -> sentences: what else to remove there over the same connection (the runs' congestion
    controls). A host that cannot be reached is said, not fatal."""
    inv = Inventory.load(inventory, commands, arg="--inventory")
    hosts = [h for h in inv.experiment_hosts() if not h.local]
    if not hosts:
        return [f"{inventory}: no experiment hosts (groups senders, receivers, routers) to clean"]
    said = []
    control = Path(tempfile.mkdtemp(prefix=f"ccrig-{os.getpid()}-clean-"))
    conns: dict[str, SshHost] = {}
    try:
        # nothing waits on a clean, and a machine loaded enough to leave things behind may be slow to log in:
        # CI once saw all six hosts of a loaded test bed miss the 15 s a run's start allows, right after a run
        conns, problems = connect_all(hosts, commands, control, within=CLEAN_CONNECT_S)
        said += [f"could not clean {p}" for p in problems]
        for h in hosts:
            if any(p.startswith(h.where) for p in problems):
                continue
            said += clean_host(conns[h.name], prefix, keep=keep, ours=ours)
            if each is not None:
                said += each(h, conns[h.name])
    finally:
        close_all(conns, control)
    return said


def run_dirs(conn: SshHost, prefix: str) -> list[str]:
    """The remote directories (undo.run_dir: /tmp/<run prefix>-<host>) on conn's host of the runs whose prefix
    starts with `prefix` (which may end in the dash: ccrig-PID-)."""
    host = conn.host.name
    if any(c in prefix + host for c in "*?[]/\\"):
        return []
    p = conn.run(["find", "/tmp", "-mindepth", "1", "-maxdepth", "1", "-type", "d", "-name", f"{prefix}*"],
                 check=False, timeout=30, root=False)
    out = []
    for d in p.stdout.split() if p.returncode == 0 else []:
        name = d.rsplit("/", 1)[-1]
        if name.endswith(f"-{host}") and (name[:-len(host)]).startswith(prefix):
            out.append(d)
    return sorted(out)


def clean_host(conn: SshHost, prefix: str, keep=None, ours=None) -> list[str]:
    """Removes what the runs with this name prefix left on a host: the processes started from their remote
    directories, the settings each run recorded in its undo.sh there (interfaces, forwarding, PAUSE), the
    directories, and any experiment addresses (198.18.x), their routes and the root qdiscs still on the
    inventory's interfaces that carry them (a run that died before writing its undo.sh). ours(run directory
    name) -> False leaves a directory alone (not a run's); keep(name) -> True spares a run still going (and
    then the host's network settings, which are that run's). Returns one sentence per thing removed."""
    h, said = conn.host, []
    dirs, kept = [], []
    for d in run_dirs(conn, prefix):
        name = d.rsplit("/", 1)[-1]
        if ours is None or ours(name):
            (kept if keep is not None and keep(name) else dirs).append(d)
    said += [f"kept {d} on host {h.name}: its run is still going" for d in kept]
    if dirs:
        said += _stop_processes(conn, dirs)
        for d in dirs:
            # the run's own record of what it changed here (UndoJournal.script), every line run as root
            undo = ('f="$1/' + UNDO_SCRIPT + '"; [ -f "$f" ] || exit 3; grep -vc "^#" "$f"; '
                    'sh "$f" >/dev/null 2>&1; true')
            p = conn.run(["sh", "-c", undo, "undo", d], check=False, timeout=120)
            if p.returncode == 0:
                said.append(f"ran {d}/{UNDO_SCRIPT} on host {h.name}: {p.stdout.strip()} commands restoring what "
                            f"the run changed")
            why = conn.remove_dir(d)
            said.append(f"could not remove {d} on host {h.name} ({why})" if why else f"removed {d} on host {h.name}")
    if kept:
        return said
    return said + _sweep_interfaces(conn, h)


def _stop_processes(conn: SshHost, dirs: list[str]) -> list[str]:
    p = conn.run(["python3", "-c", KILL_PIDFILES, *dirs], check=False, timeout=60)
    said = []
    for line in p.stdout.splitlines():
        pid, _, cmd = line.partition(" ")
        said.append(f"stopped process {pid} ({cmd[:80]}) on host {conn.host.name}")
    return said


def _sweep_interfaces(conn: SshHost, h: InventoryHost) -> list[str]:
    """The experiment addresses (198.18.x), their routes and root qdiscs on the inventory's interfaces: what a
    run that died before writing its undo.sh left."""
    said = []
    links = json.loads(conn.run(["ip", "-j", "addr", "show"], check=False, timeout=30, root=False).stdout or "[]")
    for link in links:
        dev = link.get("ifname")
        addrs = [a for a in link.get("addr_info", []) if a.get("family") == "inet"
                 and str(a.get("local", "")).startswith("198.18.")]
        if dev not in h.mapped_interfaces or not addrs:
            continue
        routes = json.loads(conn.run(["ip", "-j", "route", "show", "dev", dev], check=False, timeout=30,
                                     root=False).stdout or "[]")
        for r in routes:
            if str(r.get("dst", "")).startswith("198.18.") and r.get("gateway") and r.get("protocol") != "kernel":
                if conn.run(["ip", "route", "del", r["dst"], "via", r["gateway"], "dev", dev], check=False,
                            timeout=30).returncode == 0:
                    said.append(f"removed route {r['dst']} via {r['gateway']} from {dev} on host {h.name}")
        for a in addrs:
            address = f"{a['local']}/{a['prefixlen']}"
            if conn.run(["ip", "addr", "del", address, "dev", dev], check=False, timeout=30).returncode == 0:
                said.append(f"removed address {address} from {dev} on host {h.name}")
        qdiscs = json.loads(conn.run(["tc", "-j", "qdisc", "show", "dev", dev], check=False, timeout=30).stdout
                            or "[]")
        root = next((q for q in qdiscs if q.get("root")), None)
        # handle 0: is the kernel's default root, nothing set it
        if root is not None and root.get("handle") != "0:":
            if conn.run(["tc", "qdisc", "del", "dev", dev, "root"], check=False, timeout=30).returncode == 0:
                said.append(f"removed the root qdisc {root.get('kind')} of {dev} on host {h.name}")
    return said
