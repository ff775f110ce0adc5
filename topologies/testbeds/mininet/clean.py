"""Finding and removing what a Mininet run made, also after the run was killed (`ccrig clean`).

Each run records what it creates in /run/ccrig/mininet/<prefix>.json before creating it: its node names,
switch kind, switches and ports, Linux bridges' device group, and its owner (pid and start time). From a record,
purge() removes node shells and every process in their namespaces, switch shells, Open vSwitch bridges and
root-namespace bridges and ports; the run's hold on the Open vSwitch daemons is released by switches.OvsDaemons.

Teardown is fast where the kernel allows: a node's namespace dies with its last process and takes its veths, the
switch ports among them, in one batch; Linux bridges go in one `ip link del group` when every device in the
group is the run's (one at a time they cost ~40 ms each); Open vSwitch bridges in one ovs-vsctl transaction.

A process started on a node by the testbed carries CCRIG_NODE=<node> in its environment: the node shells die
with ccrig (their pty closes), processes started through mnexec do not, and the mark finds them once the
shells, and with them the way to name their namespaces, are gone.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from ccrig.commands import Commands, batch_text
from ccrig.procs import stop_pids
from ..netns import pids_in
from .switches import OVS_STATE, STATE, OvsDaemons, ovs_installed, owner_alive, read_json

RECORDS = STATE / "mininet"
MARK = "CCRIG_NODE"  # environment variable naming the node a process was started on
PORTS_GRACE_S = 2.0  # how long purge() waits for dead nodes' ports to go with their namespaces


def root_links() -> list[str]:
    """The interfaces of the root namespace (where switches and their ports live)."""
    try:
        return os.listdir("/sys/class/net")
    except OSError:
        return []


def group_members(group: int) -> list[str]:
    """The root namespace's interfaces in a device group: before deleting the group, purge() makes sure they are
    all the run's."""
    out = []
    for name in root_links():
        try:
            if int(Path(f"/sys/class/net/{name}/netdev_group").read_text()) == group:
                out.append(name)
        except (OSError, ValueError):
            pass
    return out


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _marked(pid: int) -> str | None:
    """The node a process was started on by MininetTestbed.run/popen (its CCRIG_NODE), if any."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    key = MARK.encode() + b"="
    return next((e[len(key):].decode(errors="replace") for e in env if e.startswith(key)), None)


def node_shells(names: set[str] | None = None, prefix: str | None = None) -> dict[str, int]:
    """Mininet node shells (`bash ... mininet:<name>`) by name: those named in `names`, or starting with
    `prefix`."""
    out = {}
    for pid in _pids():
        argv = _cmdline(pid)
        tags = [a for a in argv if a.startswith("mininet:")]
        if not tags or not argv[0].endswith("bash"):
            continue
        name = tags[0].removeprefix("mininet:")
        if (names is not None and name in names) or (prefix is not None and name.startswith(prefix)):
            out[name] = pid
    return out


def _kill(pids) -> None:
    # Mininet's shells are interactive bash, which ignores SIGTERM: no grace to wait for
    stop_pids(list(pids), grace=0)


def kill_node_processes(record: dict) -> int:
    """Kills every process on the record's nodes: those inside the node shells' namespaces (not the root
    namespace's: switches live there) and those marked with a node's name, then the node shells themselves.
    Killing them frees the nodes' namespaces and their veths at once. Returns how many were signalled."""
    nodes = set(record.get("nodes", []))
    shells = node_shells(nodes)
    root = os.stat("/proc/self/ns/net").st_ino
    # each shell's namespace, named by its /proc path (pids_in takes names under /run/netns, and an absolute
    # path joins to itself); the shells stay alive meanwhile, so these paths keep naming their namespaces
    spaces = []
    for pid in shells.values():
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino != root:
                spaces.append(f"/proc/{pid}/ns/net")
        except OSError:
            pass
    spare = set(shells.values()) | {os.getpid()}

    def find() -> list[int]:
        inside = {p for lst in pids_in(spaces).values() for p in lst}
        return [p for p in _pids() if p not in spare and (p in inside or _marked(p) in nodes)]

    count = stop_pids(find)
    _kill(shells.values())
    return count + len(shells)


def purge(record: dict, commands: Commands) -> list[str]:
    """Removes whatever of the record is still there: processes in node namespaces (which frees the
    namespaces and their veths), node and switch shells, bridges and ports. Never raises."""
    said = []
    try:
        if kill_node_processes(record):
            said.append(f"killed the processes of {record.get('prefix')}'s Mininet nodes")
        shells = node_shells(set(record.get("switches", [])))
        if shells:
            _kill(shells.values())
            said.append(f"killed {len(shells)} Mininet switch shells of {record.get('prefix')}")
        present = set(root_links())
        sws = record.get("switches", [])
        if record.get("switch") in ("ovs", "ovs-user") and sws and ovs_installed():
            bridges = set(commands.run(["ovs-vsctl", "--timeout=10", "list-br"], check=False, timeout=20)
                          .stdout.split())
            mine = [s for s in sws if s in bridges]
            if mine:
                argv = ["ovs-vsctl", "--timeout=30"]
                for s in mine:
                    argv += ["--", "--if-exists", "del-br", s]
                commands.run(argv, check=False, timeout=60)
                said.append(f"deleted {len(mine)} Open vSwitch bridges of {record.get('prefix')}")
            present = set(root_links())
        names = sws + record.get("ports", [])
        group = record.get("group")
        members = set(group_members(group)) if group else set()
        if members and members <= set(names):
            # one request: deleting bridges one at a time costs ~40 ms each (a 30-sender dumbbell's 61: 2.3 s)
            commands.run(["ip", "link", "del", "group", str(group)], check=False)
            said.append(f"deleted the bridges and ports of {record.get('prefix')} (device group {group})")
            present = set(root_links())
        # a port goes with its peer when the node's namespace dies, which the kernel does a moment after the
        # node's last process: wait for that (all at once) before deleting them one by one (~15 ms each)
        deadline = time.monotonic() + PORTS_GRACE_S
        while any(n in present for n in record.get("ports", [])) and time.monotonic() < deadline:
            time.sleep(0.01)
            present = set(root_links())
        gone = [n for n in names if n in present]
        if gone:
            commands.run(["ip", "-force", "-batch", "-"], check=False,
                         input=batch_text([["link", "del", "dev", n] for n in gone]))
            said.append(f"deleted {len(gone)} bridges and ports of {record.get('prefix')}")
    except Exception as e:
        said.append(f"could not remove all of {record.get('prefix')}'s Mininet network: {e}")
    return said


def _matches(run_prefix: str, prefix: str) -> bool:
    """Whether a run's things carry `prefix`: its names are `<run prefix>-...`, so `ccrig-`, `ccrig-4242` and
    `ccrig-4242-` all name the run ccrig-4242."""
    return (run_prefix + "-").startswith(prefix)


def _records(prefix: str) -> list[tuple[Path, dict]]:
    """The records of runs whose prefix starts with `prefix`, each with its path."""
    out = []
    for path in sorted(RECORDS.glob("*.json")) if RECORDS.exists() else []:
        rec = read_json(path)
        rec.setdefault("prefix", path.stem)
        if _matches(str(rec["prefix"]), prefix):
            out.append((path, rec))
    return out


def leftovers(prefix: str) -> list[str]:
    """What Mininet runs whose prefix starts with `prefix` left: records, node and switch shells, processes in
    node namespaces, bridges and ports (for tests and `ccrig clean`)."""
    out = []
    names: set[str] = set()
    for path, rec in _records(prefix):
        out.append(f"record {path}")
        names |= set(rec.get("switches", [])) | set(rec.get("ports", []))
        out += [f"switch shell {n}" for n in node_shells(set(rec.get("switches", [])))]
    out += [f"node shell {n}" for n in node_shells(prefix=prefix)]
    out += [f"process {p} on {node}" for p in _pids() if (node := _marked(p)) and node.startswith(prefix)]
    out += [f"interface {n}" for n in root_links() if n in names]
    return out


def cleanup(commands: Commands, prefix: str = "ccrig-", keep=lambda name: False) -> list[str]:
    """`ccrig clean`: removes what Mininet runs with this name prefix left, unless their run is still going
    (its recorded owner lives, or keep() spares its nodes), and stops Open vSwitch if ccrig started it and no
    run holds it. One line per thing done."""
    said = []
    covered: set[str] = set()
    for path, rec in _records(prefix):
        nodes = rec.get("nodes", [])
        covered |= set(nodes)
        owner = rec.get("owner", {})
        if (owner_alive(owner) and owner["pid"] != os.getpid()) or any(keep(n) for n in nodes):
            pid = f"(pid {owner['pid']}) " if owner.get("pid") else ""
            said.append(f"kept the Mininet network of {rec['prefix']}: its run {pid}is still going")
            continue
        said += purge(rec, commands)
        path.unlink(missing_ok=True)
        said.append(f"removed the Mininet record of {rec['prefix']}")
    # node shells no record names (a record removed by hand): their names carry the prefix
    stray = {n: p for n, p in node_shells(prefix=prefix).items() if n not in covered and not keep(n)}
    stray.update({n: p for p in _pids()
                  if (n := _marked(p)) and n.startswith(prefix) and n not in covered and not keep(n)})
    if stray:
        said += purge({"prefix": prefix, "nodes": list(stray)}, commands)
        _kill(stray.values())
        said.append(f"removed the processes of {len(stray)} Mininet nodes without a record, starting with {prefix}")
    if OVS_STATE.exists():
        said += OvsDaemons(commands).release_dead(prefix)
    return said
