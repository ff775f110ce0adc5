"""The hosts testbed: a Topology realised on real machines (a lab's, cloud VMs) reached over SSH.

An Ansible inventory says which machine plays which topology node and which of its NICs is cabled toward
which neighbour; `ccrig provision` (ansible/) has installed the tools. Per host variables:

    ansible_host, ansible_port, ansible_user, ansible_ssh_private_key_file, ansible_ssh_common_args
    ccrig_node: s1                        the topology node this host plays (default: the inventory name)
    ccrig_interfaces: {r1: enp1s0f0}      the interface toward each neighbouring node
    ccrig_interface: enp1s0f0             or: the one experiment interface used toward every neighbour
and for the whole inventory (all: vars:)
    ccrig_bottleneck: router | switch     where the bottleneck is (default router)

router mode: every node is a host. up() puts the topology's addresses (198.18.i.0/24) and routes on the mapped
  interfaces, makes them send wire-sized packets, and installs each link direction's tc on the transmitting
  host (the bottleneck on the router host's egress) exactly as the netns testbed does.
switch mode: the routers are a hardware switch, configured by the lab, not by ccrig. Only end-host settings
  are ours; the end hosts share one segment, 198.18.255.0/24. The bottleneck's rate and discipline in the spec
  are then a statement about the switch (used for T_max), not something ccrig applies; delay or loss on the
  switch's egress cannot be honoured and is refused.

Every command runs through one SSH connection per host (OpenSSH ControlMaster: the master is opened once, each
command is a multiplexed session, a few ms instead of a new handshake). Commands needing root run under
`sudo -n` unless the login user is root. Background processes are wrapped so that killing the local ssh (as the
runner kills any popen's process group) ends the remote process too, and down() kills any left by pid.
Project scripts named on a command line (the sampler) are copied to the host once and run from there.
Each host's clock offset against this machine is measured at up(), since samples carry the host's time.
down() restores every host: tc, addresses, routes, interface settings, forwarding, processes, staged files.
Before changing a host, up() writes the commands that undo it to undo.sh in the run's directory there, so
`ccrig clean -i` restores a host whose run was killed (SIGKILL, a lost controller) before its down().
"""
from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ..links import egress_argv
from ..testbed import Testbed
from ..topology import Interface, Topology

PROJECT = Path(__file__).resolve().parents[2]
TCP_MODULES_DEFAULTS = PROJECT / "ansible" / "roles" / "tcp_modules" / "defaults" / "main.yml"
SWITCH_SUBNET = "198.18.255"
UNDO_SCRIPT = "undo.sh"  # in a run's directory on each host: what clean -i runs if the run died unrestored
INVENTORY_ENV = "CCRIG_INVENTORY"  # the inventory a `testbed: hosts` run uses when none is passed
EXPERIMENT_GROUPS = ("senders", "receivers", "routers")  # the inventory groups whose hosts play nodes
BOTTLENECK_MODES = ("router", "switch")
# tools the testbed itself runs on every host (the workloads and collectors add iperf3 and python3)
HOST_TOOLS = ("ip", "tc", "ethtool", "sysctl", "iperf3", "python3", "ss")

# A background command on a host: its pid goes to a file (down() kills leftovers), its stdin is /dev/null, and
# a watcher ends it when our ssh goes away (the channel's stdin then reads EOF), so killing the local ssh client
# stops the remote process as it would a local one. The watcher's output is detached so the session can close.
# (A background list's stdin is /dev/null in a non-interactive shell, hence the explicit fd 3.)
POPEN_WRAPPER = ('pf="$1"; shift; exec 3<&0; "$@" </dev/null 3<&- & c=$!; echo $c >"$pf"; '
                 '(cat <&3 >/dev/null; kill -TERM $c) >/dev/null 2>&1 & '
                 'exec 3<&-; wait $c; s=$?; rm -f "$pf"; exit $s')


# answers each line read with the host's time, for the clock offset
CLOCK_ECHO = "import sys, time\nfor _ in sys.stdin: print(repr(time.time()), flush=True)"


def _log(commands: Commands, argv: list[str]) -> None:
    """Logs a background command started here rather than by Commands.popen (which has no stdin pipe)."""
    log = getattr(commands, "_log", None)
    if log:
        log(argv, "&")


# --- the inventory -------------------------------------------------------------------------------------

@dataclass
class InventoryHost:
    name: str
    address: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    ssh_args: list[str] = field(default_factory=list)
    become: bool = False
    node: str | None = None
    interfaces: dict[str, str] = field(default_factory=dict)
    interface: str | None = None
    groups: list[str] = field(default_factory=list)
    vars: dict = field(default_factory=dict)
    local: bool = False  # ansible_connection: local (the controller itself), not reached over SSH

    @property
    def where(self) -> str:
        return f"host {self.name} ({self.user}@{self.address}:{self.port})"

    @property
    def tcp_modules_dir(self) -> str:
        """Where the tcp_modules role put the laws on this host: its tcp_modules_dir, else the role's default."""
        d = self.vars.get("tcp_modules_dir")
        if not d:
            import yaml
            d = yaml.safe_load(TCP_MODULES_DEFAULTS.read_text())["tcp_modules_dir"]
        return str(d)

    @property
    def mapped_interfaces(self) -> list[str]:
        """The experiment interfaces the inventory names on this host."""
        return sorted(set(self.interfaces.values()) | ({self.interface} if self.interface else set()))


@dataclass
class Inventory:
    path: Path
    hosts: dict[str, InventoryHost]
    groups: dict[str, list[str]]

    @classmethod
    def load(cls, path: Path, commands: Commands, arg: str = "-i") -> "Inventory":
        """Reads an inventory as Ansible does (ansible-inventory --list: INI, YAML, directories, group_vars)."""
        path = Path(path)
        if not path.exists():
            raise InputError(f"{arg}: got {str(path)!r}; expected an Ansible inventory file or directory "
                             f"(e.g. ansible/inventories/local.yml)")
        proc = commands.run([ansible_tool("ansible-inventory"), "-i", str(path), "--list"], check=False,
                            timeout=120)
        problem = _inventory_warning(proc.stderr)
        if proc.returncode != 0 or problem:
            raise InputError(f"{arg}: {path}: not a readable Ansible inventory: {problem or proc.stderr.strip()}")
        data = json.loads(proc.stdout)
        hostvars = data.get("_meta", {}).get("hostvars", {})
        groups = _groups(data)
        hosts = {}
        for name, v in hostvars.items():
            hosts[name] = _host(name, v, [g for g, members in groups.items() if name in members], path)
        return cls(path, hosts, groups)

    def experiment_hosts(self) -> list[InventoryHost]:
        """The hosts that play topology nodes: those in the senders, receivers and routers groups."""
        return [h for h in self.hosts.values() if set(h.groups) & set(EXPERIMENT_GROUPS)]

    def bottleneck_mode(self) -> str:
        modes = {h.vars.get("ccrig_bottleneck", "router") for h in self.experiment_hosts()}
        bad = modes - set(BOTTLENECK_MODES)
        if bad or len(modes) > 1:
            raise InputError(f"{self.path}: ccrig_bottleneck: got {sorted(modes)}; expected one of "
                             f"{', '.join(BOTTLENECK_MODES)} for the whole inventory")
        return modes.pop() if modes else "router"

    def host_for(self, node: str) -> InventoryHost | None:
        for h in self.experiment_hosts():
            if h.node == node:
                return h
        h = self.hosts.get(node)
        return h if h is not None and h in self.experiment_hosts() and h.node in (None, node) else None


def ansible_tool(name: str) -> str:
    """An Ansible command from the environment ccrig runs in (the venv's bin), else from PATH."""
    import sys
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def _inventory_warning(stderr: str) -> str:
    # ansible-inventory exits 0 with an empty inventory when it cannot parse the source; it only warns
    for line in stderr.splitlines():
        if "Unable to parse" in line or "Failed to parse" in line or "No inventory was parsed" in line:
            return line.replace("[WARNING]:", "").strip()
    return ""


def _groups(data: dict) -> dict[str, list[str]]:
    """group -> every host in it, children included."""
    def members(g: str, seen=()) -> list[str]:
        node = data.get(g, {})
        out = list(node.get("hosts", []))
        for child in node.get("children", []):
            if child not in seen:
                out += members(child, (*seen, g))
        return out
    return {g: members(g) for g in data if g != "_meta"}


def _host(name: str, v: dict, groups: list[str], path: Path) -> InventoryHost:
    def field_err(key, value, accepted):
        return InputError(f"{path}: host {name}: {key}: got {value!r}; expected {accepted}")
    ifs = v.get("ccrig_interfaces", {}) or {}
    if not isinstance(ifs, dict) or not all(isinstance(d, str) for d in ifs.values()):
        raise field_err("ccrig_interfaces", ifs, "a mapping of neighbour node -> interface name")
    try:
        port = int(v.get("ansible_port", v.get("ansible_ssh_port", 22)))
    except (TypeError, ValueError):
        raise field_err("ansible_port", v.get("ansible_port"), "a TCP port number") from None
    user = str(v.get("ansible_user", v.get("ansible_ssh_user", os.environ.get("USER", "root"))))
    key = v.get("ansible_ssh_private_key_file") or v.get("ansible_private_key_file")
    args = [*shlex.split(str(v.get("ansible_ssh_common_args", ""))),
            *shlex.split(str(v.get("ansible_ssh_extra_args", "")))]
    become = user != "root" or bool(v.get("ansible_become", False))
    return InventoryHost(name=name, address=str(v.get("ansible_host", name)), port=port, user=user,
                         key=str(key) if key else None, ssh_args=args, become=become,
                         node=v.get("ccrig_node"), interfaces=dict(ifs), interface=v.get("ccrig_interface"),
                         groups=groups, vars=v, local=v.get("ansible_connection") == "local")


# --- one SSH connection per host -----------------------------------------------------------------------

class SshHost:
    """A host reached over one multiplexed SSH connection (ControlMaster) that this object owns."""

    def __init__(self, host: InventoryHost, commands: Commands, control_dir: Path):
        self.host = host
        self.commands = commands
        self.control = control_dir / f"{host.name}.sock"
        self.master: subprocess.Popen | None = None
        self.keep: dict[int, int] = {}  # background command's local pid -> write end of its stdin

    def ssh_argv(self) -> list[str]:
        h = self.host
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "ServerAliveInterval=5",
                "-o", "ServerAliveCountMax=3", "-o", f"ControlPath={self.control}", "-p", str(h.port),
                "-l", h.user]
        if h.key:
            argv += ["-i", h.key]
        return argv + h.ssh_args

    def open(self) -> str:
        """Opens the master connection; returns "" or the reason it failed (ssh's own last words)."""
        if self.master is not None and self.master.poll() is None:
            return ""
        # -M -N: a master that runs no command and stays in the foreground, so it is our child to stop.
        # ControlPersist=no: it lives exactly as long as we keep it (down() ends it), never lingering after.
        argv = [*self.ssh_argv(), "-M", "-N", "-o", "ControlMaster=yes", "-o", "ControlPersist=no",
                self.host.address]
        self.master = self.commands.popen(argv, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.master.poll() is not None:
                err = self.master.stderr.read().decode(errors="replace").strip().splitlines()
                status, self.master = self.master.returncode, None
                return err[-1] if err else f"ssh exited with status {status}"
            if self.control.exists() and self._check():
                return ""
            time.sleep(0.05)
        self.close()
        return "no SSH connection within 15 s"

    def _check(self) -> bool:
        return self.commands.ok(["ssh", "-o", f"ControlPath={self.control}", "-O", "check", self.host.address],
                                timeout=10)

    def close(self) -> None:
        if self.master is None:
            return
        self.commands.ok(["ssh", "-o", f"ControlPath={self.control}", "-O", "exit", self.host.address], timeout=10)
        try:
            self.master.wait(5)
        except subprocess.TimeoutExpired:
            self.master.kill()
            self.master.wait()
        self.master = None

    def remote(self, argv: list[str], root: bool = True) -> list[str]:
        """The local argv that runs argv on the host (over the master; as root when asked)."""
        words = (["sudo", "-n", "--"] if root and self.host.become else []) + list(argv)
        return [*self.ssh_argv(), "-o", "ControlMaster=no", self.host.address, "--", shlex.join(words)]

    def run(self, argv: list[str], check: bool = True, timeout: float = 60, root: bool = True,
            input: str | None = None) -> subprocess.CompletedProcess:
        # the host's own timeout ends the command there; ours (later) only guards a hung connection
        timed = ["timeout", "-k", "3", f"{timeout:g}", *argv]
        return self.commands.run(self.remote(timed, root), check=check, timeout=timeout + 15, input=input)

    def popen(self, argv: list[str], pidfile: str, stdout, stderr) -> subprocess.Popen:
        full = self.remote(["sh", "-c", POPEN_WRAPPER, "ccrig", pidfile, *argv])
        # ssh's stdin is a pipe whose write end only we hold (not the Popen's, so communicate() cannot close
        # it): EOF on the host then means our ssh or this process is gone, or close_stdin() said stop.
        r, w = os.pipe()
        _log(self.commands, full)
        try:
            p = subprocess.Popen(full, stdin=r, stdout=stdout, stderr=stderr, start_new_session=True)
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        self.keep[p.pid] = w
        return p

    def end(self, proc: subprocess.Popen) -> None:
        """Ends one background command the way the wrapper knows: EOF on its stdin, then SIGTERM there, so its
        last words still come back through ssh."""
        w = self.keep.pop(proc.pid, None)
        if w is not None:
            os.close(w)

    def close_stdin(self) -> None:
        """Ends every background command still running through this connection (see POPEN_WRAPPER)."""
        for w in self.keep.values():
            try:
                os.close(w)
            except OSError:
                pass
        self.keep.clear()


# --- checks shared with `ccrig provision` --------------------------------------------------------------

def connect_all(hosts: list[InventoryHost], commands: Commands, control_dir: Path,
                interfaces: dict[str, list[str]] | None = None,
                tools: tuple[str, ...] = ()) -> tuple[dict[str, SshHost], list[str]]:
    """Opens a connection to every host and checks it is usable: reachable, root (or sudo without a
    password), the named interfaces present, the tools installed. Returns the connections and the problems,
    each a sentence naming the host and the reason. Hosts are checked in parallel."""
    conns = {h.name: SshHost(h, commands, control_dir) for h in hosts}

    def check(h: InventoryHost) -> list[str]:
        c = conns[h.name]
        err = c.open()
        if err:
            return [f"{h.where}: unreachable over SSH: {err}"]
        out = []
        if h.become:
            p = c.run(["true"], check=False, timeout=15)
            if p.returncode != 0:
                why = (p.stderr.strip().splitlines() or ["sudo failed"])[-1]
                return [f"{h.where}: user {h.user} cannot run commands as root without a password "
                        f"(sudo -n: {why}); give it NOPASSWD sudo or log in as root"]
        wanted = (interfaces or {}).get(h.name, [])
        if wanted:
            p = c.run(["ip", "-o", "link", "show"], check=False, timeout=15, root=False)
            present = [ln.split(":")[1].strip().split("@")[0] for ln in p.stdout.splitlines() if ":" in ln]
            for dev in wanted:
                if dev not in present:
                    out.append(f"{h.where}: interface {dev!r} does not exist there; it has {', '.join(present)}")
        if tools:
            script = " ".join(f"command -v {t} >/dev/null || echo {t};" for t in tools)
            p = c.run(["sh", "-c", f"PATH=$PATH:/usr/sbin:/sbin; {script}"], check=False, timeout=15)
            missing = p.stdout.split()
            if missing:
                out.append(f"{h.where}: missing {', '.join(missing)}; run `ccrig provision -i INVENTORY`")
        return out

    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(hosts)))) as pool:
        for found in pool.map(check, hosts):
            problems += found
    return conns, problems


def inventory_path(inventory: Path | str | None) -> Path:
    """The inventory a `testbed: hosts` run uses: the one given, else $CCRIG_INVENTORY."""
    if inventory is None:
        inventory = os.environ.get(INVENTORY_ENV)
        if not inventory:
            raise InputError(f"testbed: got 'hosts' with no inventory; expected an Ansible inventory "
                             f"(set {INVENTORY_ENV}=PATH, e.g. ansible/inventories/lab.example.yml)")
    return Path(inventory)


def close_all(conns: dict[str, SshHost], control_dir: Path | None) -> None:
    """Closes the connections and removes their control folder; never raises."""
    for conn in conns.values():
        try:
            conn.close()
        except Exception:  # a host that went away must not keep the others open
            pass
    if control_dir is not None:
        for f in control_dir.glob("*"):
            f.unlink(missing_ok=True)
        try:
            control_dir.rmdir()
        except OSError:
            pass


class NodeConnections:
    """SSH connections to the hosts playing some topology nodes, apart from any testbed. The runner keeps them
    for a whole run to load congestion controls on the senders' hosts and to remove them at the end, while
    each repetition's testbed connects and disconnects (its down() closes its own connections)."""

    def __init__(self, nodes: list[str], commands: Commands, prefix: str, inventory: Path | None = None):
        self.nodes = list(nodes)
        self.commands = commands
        self.prefix = prefix
        self.inventory_path = inventory_path(inventory)
        self.hosts: dict[str, InventoryHost] = {}     # node -> host
        self.conns: dict[str, SshHost] = {}           # node -> connection
        self._control_dir: Path | None = None

    def open(self) -> list[str]:
        """Maps the nodes to hosts and connects to them; returns the problems, each naming host and reason."""
        inv = Inventory.load(self.inventory_path, self.commands, arg="inventory")
        problems = []
        for n in self.nodes:
            h = inv.host_for(n)
            if h is None:
                problems.append(f"node {n}: no inventory host plays it; add one with ccrig_node: {n} to {inv.path}")
            elif h.local:
                problems.append(f"host {h.name} plays node {n} but has ansible_connection local; the hosts "
                                f"testbed reaches every node over SSH (use the netns testbed on this machine)")
            else:
                self.hosts[n] = h
        if problems:
            return problems
        self._control_dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-ssh-cc-"))
        conns, problems = connect_all(list(self.hosts.values()), self.commands, self._control_dir)
        self.conns = {n: conns[h.name] for n, h in self.hosts.items()}
        return problems

    def close(self) -> None:
        """Closes every connection; never raises, safe to call twice."""
        close_all(self.conns, self._control_dir)
        self.conns, self._control_dir = {}, None


# --- `ccrig clean -i INVENTORY`: what a killed run left on its hosts -----------------------------------

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


def run_dirs(conn: SshHost, prefix: str) -> list[str]:
    """The remote directories (/tmp/<run prefix>-<host>, see HostsTestbed._remote_dir) on conn's host of the
    runs whose prefix starts with `prefix` (which may end in the dash: ccrig-PID-)."""
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
        p = conn.run(["python3", "-c", KILL_PIDFILES, *dirs], check=False, timeout=60)
        for line in p.stdout.splitlines():
            pid, _, cmd = line.partition(" ")
            said.append(f"stopped process {pid} ({cmd[:80]}) on host {h.name}")
        for d in dirs:
            # the run's own record of what it changed here (HostsTestbed._write_undo), every line run as root
            undo = ('f="$1/' + UNDO_SCRIPT + '"; [ -f "$f" ] || exit 3; grep -vc "^#" "$f"; '
                    'sh "$f" >/dev/null 2>&1; true')
            p = conn.run(["sh", "-c", undo, "undo", d], check=False, timeout=120)
            if p.returncode == 0:
                said.append(f"ran {d}/{UNDO_SCRIPT} on host {h.name}: {p.stdout.strip()} commands restoring what "
                            f"the run changed")
            if conn.run(["rm", "-rf", "--one-file-system", "--", d], check=False, timeout=60).returncode == 0:
                said.append(f"removed {d} on host {h.name}")
            else:
                said.append(f"could not remove {d} on host {h.name}")
    if kept:
        return said
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


# --- the testbed ---------------------------------------------------------------------------------------

@dataclass
class _Port:
    """One topology interface as it is realised on a host."""
    node: str
    dev: str               # the host's real interface
    iface: Interface        # the topology's view of it
    address: str
    prefix: int
    saved: dict = field(default_factory=dict)  # the interface's settings before up(), restored by down()


class HostsTestbed(Testbed):
    name = "hosts"

    def __init__(self, topology: Topology, commands: Commands, prefix: str, inventory: Path | None = None,
                 bottleneck: str | None = None):
        super().__init__(topology, commands, prefix)
        self.inventory_path = inventory_path(inventory)
        self._inventory: Inventory | None = None
        self._bottleneck = bottleneck
        self.conns: dict[str, SshHost] = {}
        self.hosts: dict[str, InventoryHost] = {}      # node -> host
        self.ports: dict[str, list[_Port]] = {}       # node -> its realised interfaces
        self.clock: dict[str, dict] = {}               # node -> {"offset_s", "uncertainty_s"}
        self.kernels: dict[str, str] = {}
        self._control_dir: Path | None = None
        self._staged: dict[tuple[str, str], str] = {}
        self._procs: dict[str, list[str]] = {}         # node -> remote pid files
        self._forwarding: dict[str, str] = {}         # router node -> ip_forward before up()
        self._routes: dict[str, list[list[str]]] = {}
        self._remembered: dict[str, list[list[str]]] = {}  # node -> remember_undo()'s commands
        self._seq = 0
        self._lock = threading.Lock()
        self._prepared = False

    # --- mapping -------------------------------------------------------------------------------------
    @property
    def inventory(self) -> Inventory:
        if self._inventory is None:
            self._inventory = Inventory.load(self.inventory_path, self.commands, arg="inventory")
        return self._inventory

    @property
    def bottleneck_mode(self) -> str:
        mode = self._bottleneck or self.inventory.bottleneck_mode()
        if mode not in BOTTLENECK_MODES:
            raise InputError(f"bottleneck: got {mode!r}; expected one of {', '.join(BOTTLENECK_MODES)}")
        return mode

    def owned(self, node: str) -> bool:
        """Whether ccrig configures node (False for the switch's nodes in switch mode)."""
        return not (self.bottleneck_mode == "switch" and self.topology.node(node).role == "router")

    def _map(self) -> list[str]:
        """Maps nodes to hosts and topology interfaces to host interfaces; returns the problems found."""
        inv, topo, problems = self.inventory, self.topology, []
        switch = self.bottleneck_mode == "switch"
        self.hosts, self.ports = {}, {}
        ifs = topo.interfaces()
        end_hosts = [n.name for n in topo.nodes if self.owned(n.name)]
        for n in topo.nodes:
            h = inv.host_for(n.name)
            if not self.owned(n.name):
                if h is not None:
                    problems.append(f"{h.where} plays node {n.name}, a router, but ccrig_bottleneck is switch: "
                                    f"the routers are the hardware switch; remove it or use router mode")
                for x in ifs[n.name]:
                    e = x.egress
                    if e.needs_netem:
                        problems.append(f"node {n.name} (the switch) toward {x.peer}: delay/loss cannot be "
                                        f"applied by a hardware switch; set the spec's rtt and loss to 0 or use "
                                        f"a Linux router host (ccrig_bottleneck: router)")
                continue
            if h is None:
                problems.append(f"node {n.name}: no inventory host plays it; add one with ccrig_node: {n.name} "
                                f"to {inv.path}")
                continue
            if h.local:
                problems.append(f"host {h.name} plays node {n.name} but has ansible_connection local; the hosts "
                                f"testbed reaches every node over SSH (use the netns testbed on this machine)")
                continue
            self.hosts[n.name] = h
            ports = []
            for x in ifs[n.name]:
                dev = h.interfaces.get(x.peer) or h.interface
                if switch and dev is None and len(h.interfaces) == 1:
                    dev = next(iter(h.interfaces.values()))
                if dev is None:
                    problems.append(f"{h.where} (node {n.name}): no interface toward {x.peer}; set "
                                    f"ccrig_interfaces: {{{x.peer}: DEV}} (or ccrig_interface: DEV)")
                    continue
                if switch:
                    address, plen = f"{SWITCH_SUBNET}.{end_hosts.index(n.name) + 1}", 24
                else:
                    address, plen = x.address, x.prefix
                ports.append(_Port(n.name, dev, x, address, plen))
            if switch:  # one segment: one address per host, whatever the number of topology links
                ports = ports[:1]
            self.ports[n.name] = ports
        return problems

    # --- preflight -----------------------------------------------------------------------------------
    def preflight(self) -> list[str]:
        """Checks the inventory, the mapping and every host (reachable, root, interfaces, tools) and keeps
        the connections for up()."""
        if self._prepared:
            return []
        problems = self._map()
        if problems:
            return problems
        self._control_dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-ssh-"))
        wanted = {h.name: sorted({p.dev for p in self.ports[n]}) for n, h in self.hosts.items()}
        self.conns, problems = connect_all(list(self.hosts.values()), self.commands, self._control_dir,
                                           wanted, HOST_TOOLS)
        self.conns = {n: self.conns[h.name] for n, h in self.hosts.items()}
        self._prepared = not problems
        return problems

    # --- up ------------------------------------------------------------------------------------------
    def up(self) -> None:
        problems = self.preflight()
        if problems:
            self.down()
            raise InputError("hosts testbed: " + "; ".join(problems))
        try:
            self._measure_clocks()
            self._each(self._prepare_host)
            for node, ports in self.ports.items():
                for p in ports:
                    # replace: an address left by a run that died is taken over, not an error
                    self.run(node, ["ip", "addr", "replace", f"{p.address}/{p.prefix}", "dev", p.dev])
            if self.bottleneck_mode == "router":
                for node, routes in self.topology.routes().items():
                    # in undo.sh before they exist: a run killed in between leaves nothing clean cannot undo
                    self._routes[node] = [["ip", "route", "del", subnet, "via", via] for subnet, via in routes]
                    self._write_undo(node)
                    for subnet, via in routes:
                        self.run(node, ["ip", "route", "replace", subnet, "via", via])
            flows = max(1, len(self.topology.pairs))
            for node, ports in self.ports.items():
                for p in ports:
                    for argv in egress_argv(p.dev, p.iface.egress, self.topology.mtu, flows):
                        self.run(node, argv)
        except BaseException:
            self.down()
            raise

    def _each(self, fn) -> None:
        """fn(node) on every host in parallel; the first error is raised after all finished."""
        with ThreadPoolExecutor(max_workers=min(16, max(1, len(self.hosts)))) as pool:
            for _ in pool.map(fn, list(self.hosts)):
                pass

    def _measure_clocks(self) -> None:
        """Each host's clock minus ours, NTP-style: over one open session (so no session set-up sits inside
        the round trip) ask the host's time a few times; the sample with the shortest round trip wins and its
        error is at most half that round trip."""
        def measure(node: str) -> None:
            argv = self.conns[node].remote(["python3", "-u", "-c", CLOCK_ECHO], root=False)
            _log(self.commands, argv)
            p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True)
            best = None
            try:
                for _ in range(8):
                    t0 = time.time()
                    p.stdin.write("\n")
                    p.stdin.flush()
                    line = p.stdout.readline()
                    t1 = time.time()
                    if not line:
                        raise RunError(f"{self.hosts[node].where}: no clock reading: {p.stderr.read().strip()}")
                    if best is None or t1 - t0 < best[1]:
                        best = (float(line) - (t0 + t1) / 2, t1 - t0)
            finally:
                p.stdin.close()
                p.wait(10)
            self.clock[node] = {"offset_s": best[0], "uncertainty_s": best[1] / 2}
            self.kernels[node] = self.run(node, ["uname", "-r"], timeout=10).stdout.strip()
        self._each(measure)

    def _prepare_host(self, node: str) -> None:
        """Records each port's settings (and forwarding on a router) in the host's undo.sh first, then makes
        the ports send wire-sized packets (see topologies/netns.py)."""
        wire = str(self.topology.mtu + 14)
        router = self.topology.node(node).role == "router"
        if router:
            self._forwarding[node] = self.run(node, ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip()
        for p in self.ports[node]:
            link = json.loads(self.run(node, ["ip", "-d", "-j", "link", "show", "dev", p.dev]).stdout)[0]
            feats = self.run(node, ["ethtool", "-k", p.dev]).stdout
            p.saved = {
                "mtu": link.get("mtu"), "gso_max_segs": link.get("gso_max_segs"),
                "gso_max_size": link.get("gso_max_size"), "gro_max_size": link.get("gro_max_size"),
                "features": _features(feats, ("tcp-segmentation-offload", "generic-segmentation-offload",
                                              "generic-receive-offload")),
                "up": "UP" in link.get("flags", []),
            }
        self._write_undo(node)
        if router:
            self.run(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        for p in self.ports[node]:
            self.run(node, ["ip", "link", "set", "dev", p.dev, "mtu", str(self.topology.mtu)])
            self.run(node, ["ip", "link", "set", "dev", p.dev, "gso_max_segs", "1", "gso_max_size", wire,
                            "gro_max_size", wire])
            self.run(node, ["ethtool", "-K", p.dev, "tso", "off", "gso", "off", "gro", "off"], check=False)
            self.run(node, ["ip", "link", "set", "dev", p.dev, "up"])

    # --- commands on nodes ---------------------------------------------------------------------------
    def _conn(self, node: str) -> SshHost:
        try:
            return self.conns[node]
        except KeyError:
            raise RunError(f"node {node}: not a host of this testbed (in switch mode the routers are the "
                           f"switch); hosts: {', '.join(self.conns) or 'none connected'}") from None

    def run(self, node, argv, check=True, timeout=60):
        conn = self._conn(node)
        return conn.run(self._staged_argv(node, argv), check=check, timeout=timeout)

    def popen(self, node, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        conn = self._conn(node)
        with self._lock:
            self._seq += 1
            pidfile = f"{self._remote_dir(node)}/p{self._seq}.pid"
            self._procs.setdefault(node, []).append(pidfile)
        self._ensure_remote_dir(node)
        return conn.popen(self._staged_argv(node, argv), pidfile, stdout, stderr)

    def end(self, node, proc):
        self._conn(node).end(proc)

    def python(self, node: str) -> list[str]:
        return ["python3"]

    def address(self, node: str) -> str:
        if node in self.ports and self.ports[node]:
            return self.ports[node][0].address
        return self.topology.address(node)

    def egress_device(self, a: str, b: str) -> str:
        for p in self.ports.get(a, []):
            if p.iface.peer == b or self.bottleneck_mode == "switch":
                return p.dev
        raise RunError(f"node {a}: no interface toward {b} on this testbed "
                       f"({'the switch is not ours' if not self.owned(a) else 'not mapped'})")

    def clock_offset(self, node: str) -> float:
        """Host clock minus this machine's, in seconds: subtract it from times the host reports."""
        return self.clock.get(node, {}).get("offset_s", 0.0)

    def describe(self) -> dict:
        """What env.json should say about the hosts: mapping, clocks, kernels, what is not ours."""
        return {
            "inventory": str(self.inventory_path), "bottleneck": self.bottleneck_mode,
            "nodes": {n: {"host": h.name, "address": h.address, "kernel": self.kernels.get(n),
                          "interfaces": {p.iface.peer: p.dev for p in self.ports.get(n, [])},
                          "clock": self.clock.get(n)} for n, h in self.hosts.items()},
            "not_applied": [] if self.bottleneck_mode == "router" else [
                f"{n.name}: the hardware switch (its rate and queue are the lab's configuration)"
                for n in self.topology.nodes if not self.owned(n.name)],
        }

    def _remote_dir(self, node: str) -> str:
        # per host, so hosts sharing a filesystem (or the one-machine test bed) never collide
        return f"/tmp/{self.prefix}-{self.hosts[node].name}"

    def _ensure_remote_dir(self, node: str) -> None:
        key = (node, "")
        if key not in self._staged:
            self._conn(node).run(["mkdir", "-p", self._remote_dir(node)], root=False)
            self._staged[key] = self._remote_dir(node)

    def _staged_argv(self, node: str, argv: list[str]) -> list[str]:
        """argv with every project file it names replaced by that file's copy on the host."""
        out = []
        for word in argv:
            p = Path(word) if word.startswith("/") else None
            if p is not None and p.is_file() and PROJECT in p.resolve().parents:
                word = self.stage(node, p)
            out.append(word)
        return out

    def _put(self, node: str, name: str, text: str, decode: str = "cat") -> str:
        """Writes text (through decode on the host) to name in the run's directory there; returns its path."""
        self._ensure_remote_dir(node)
        remote = f"{self._remote_dir(node)}/{name}"
        self._conn(node).run(["sh", "-c", decode + ' > "$1"', "put", remote], root=False, input=text)
        return remote

    def stage(self, node: str, path: Path) -> str:
        """Copies path to the host once (text as it is, so commands.log shows it; a binary as base64)."""
        key = (node, str(path))
        with self._lock:
            if key in self._staged:
                return self._staged[key]
        try:
            remote = self._put(node, path.name, path.read_text())
        except UnicodeDecodeError:
            remote = self._put(node, path.name, base64.b64encode(path.read_bytes()).decode(), decode="base64 -d")
        with self._lock:
            self._staged[key] = remote
        return remote

    # --- down ----------------------------------------------------------------------------------------
    def down(self) -> None:
        """Restores every host; best effort, never raises, safe to call twice."""
        def restore(node: str) -> None:
            conn = self.conns.get(node)
            if conn is None or conn.master is None:
                return
            try:
                self._restore_host(node, conn)
            except Exception:  # a host that went away must not stop the others' restore
                pass
        try:
            with ThreadPoolExecutor(max_workers=min(16, max(1, len(self.conns)))) as pool:
                list(pool.map(restore, list(self.conns)))
        finally:
            close_all(self.conns, self._control_dir)
            self.conns, self._control_dir, self._prepared = {}, None, False
            self._staged.clear()
            self._procs.clear()
            self._routes.clear()
            self._remembered.clear()
            self._forwarding.clear()

    def _restore_host(self, node: str, conn: SshHost) -> None:
        def quiet(argv):
            try:
                conn.run(argv, check=False, timeout=20)
            except RunError:
                pass
        conn.close_stdin()
        pidfiles = self._procs.get(node, [])
        if pidfiles:
            # the wrappers end their commands when our ssh goes; these are the ones that outlived it
            kill = ('for f in "$@"; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done; sleep 0.5; '
                    'for f in "$@"; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done; true')
            quiet(["sh", "-c", kill, "kill", *pidfiles])
        for argv in self._undo_argv(node, remembered=False):
            quiet(argv)
        if node in self.hosts:
            quiet(["rm", "-rf", "--one-file-system", self._remote_dir(node)])

    def _undo_argv(self, node: str, remembered: bool = True) -> list[list[str]]:
        """The commands that put node's host back as it was before up(), from what up() recorded: what callers
        asked to remember (remember_undo, newest first; not for down(): their owners restore those), the
        routes, each prepared port's qdisc, address, sizes, offloads and state, and forwarding. One list for
        down() and for the host's undo.sh."""
        out = list(reversed(self._remembered.get(node, []))) if remembered else []
        out += self._routes.get(node, [])
        for p in self.ports.get(node, []):
            s = p.saved
            if not s:
                # never prepared (a preflight that only connected, or an up() that failed before it): a lab
                # NIC's own root qdisc and addresses are not ours to remove
                continue
            out.append(["tc", "qdisc", "del", "dev", p.dev, "root"])
            out.append(["ip", "addr", "del", f"{p.address}/{p.prefix}", "dev", p.dev])
            args = []
            for k in ("gso_max_segs", "gso_max_size", "gro_max_size"):
                if s.get(k) is not None:
                    args += [k, str(s[k])]
            if s.get("mtu"):
                args += ["mtu", str(s["mtu"])]
            if args:
                out.append(["ip", "link", "set", "dev", p.dev, *args])
            feats = s.get("features", {})
            names = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                     "generic-receive-offload": "gro"}
            kargs = [w for k, v in feats.items() for w in (names[k], "on" if v else "off")]
            if kargs:
                out.append(["ethtool", "-K", p.dev, *kargs])
            if not s.get("up", True):
                out.append(["ip", "link", "set", "dev", p.dev, "down"])
        if node in self._forwarding:
            out.append(["sysctl", "-q", "-w", f"net.ipv4.ip_forward={self._forwarding[node]}"])
        return out

    def remember_undo(self, node: str, argv: list[str]) -> None:
        """A command that undoes a change its caller made on node's host and restores itself (a NIC's PAUSE
        setting): run by `ccrig clean -i` from the host's undo.sh should this process die before that."""
        self._remembered.setdefault(node, []).append(list(argv))
        self._write_undo(node)

    def _write_undo(self, node: str) -> None:
        """Keeps UNDO_SCRIPT in the run's directory on the host current: a shell script, one command per line,
        that `ccrig clean -i` runs (as root, every line whatever the others do) when the run died unrestored."""
        lines = [f"# ccrig: undoes run {self.prefix}'s changes to this host (node {node}); run by ccrig clean -i"]
        lines += [shlex.join(argv) for argv in self._undo_argv(node)]
        self._put(node, UNDO_SCRIPT, "\n".join(lines) + "\n")


def _features(ethtool_k: str, names: tuple[str, ...]) -> dict[str, bool]:
    """The on/off state of the named offloads in `ethtool -k` output (fixed ones are left alone)."""
    out = {}
    for line in ethtool_k.splitlines():
        key, _, rest = line.strip().partition(":")
        if key in names and "[fixed]" not in rest:
            out[key] = rest.strip().startswith("on")
    return out

