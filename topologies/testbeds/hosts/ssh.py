"""One SSH connection per host (OpenSSH ControlMaster): the master is opened once and each command is a
multiplexed session over it, a few ms instead of a new handshake. Commands needing root run under `sudo -n`
unless the login user is root.

    SshHost            a host over its own master connection, as a ccrig.commands.Node (run, popen, put)
    connect_all        opens and checks the connections to many hosts (the testbed, provisioning, clean -i)
    close_all          closes them and removes their control folder
    NodeConnections    connections to the hosts of some topology nodes, apart from any testbed (the runner's
                       congestion controls live for a whole run, across the repetitions' testbeds)
"""
from __future__ import annotations

import base64
import gzip
import os
import shlex
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import RunError
from .inventory import Inventory, InventoryHost, inventory_path

# A background command on a host: its pid goes to a file (when one is named: down() kills leftovers), its stdin
# is /dev/null, and a watcher ends it when our ssh goes away (the channel's stdin then reads EOF), so killing the
# local ssh client stops the remote process as it would a local one. The watcher's output is detached so the
# session can close. (A background list's stdin is /dev/null in a non-interactive shell, hence the explicit fd 3.)
POPEN_WRAPPER = ('pf="$1"; shift; exec 3<&0; "$@" </dev/null 3<&- & c=$!; [ -z "$pf" ] || echo $c >"$pf"; '
                 '(cat <&3 >/dev/null; kill -TERM $c) >/dev/null 2>&1 & '
                 'exec 3<&-; wait $c; s=$?; [ -z "$pf" ] || rm -f "$pf"; exit $s')


class SshHost:
    """A host reached over one multiplexed SSH connection (ControlMaster) that this object owns. As a
    ccrig.commands.Node its commands run as root; root=False runs one as the login user."""

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

    def open(self, within: float = 15.0) -> str:
        """Opens the master connection within `within` seconds; returns "" or the reason it failed (ssh's own last
        words)."""
        if self.master is not None and self.master.poll() is None:
            return ""
        # -M -N: a master that runs no command and stays in the foreground, so it is our child to stop.
        # ControlPersist=no: it lives exactly as long as we keep it (down() ends it), never lingering after.
        argv = [*self.ssh_argv(), "-M", "-N", "-o", "ControlMaster=yes", "-o", "ControlPersist=no",
                self.host.address]
        self.master = self.commands.popen(argv, stderr=subprocess.PIPE)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.master.poll() is not None:
                err = self.master.stderr.read().decode(errors="replace").strip().splitlines()
                status, self.master = self.master.returncode, None
                return err[-1] if err else f"ssh exited with status {status}"
            if self.control.exists() and self._check():
                return ""
            time.sleep(0.05)
        self.close()
        return f"no SSH connection within {within:g} s"

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

    def run(self, argv: list[str], check: bool = True, timeout: float = 60, input: str | None = None, *,
            root: bool = True) -> subprocess.CompletedProcess:
        # the host's own timeout ends the command there; ours (later) only guards a hung connection
        timed = ["timeout", "-k", "3", f"{timeout:g}", *argv]
        return self.commands.run(self.remote(timed, root), check=check, timeout=timeout + 15, input=input)

    def popen(self, argv: list[str], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL, *, pidfile: str | None = None, root: bool = True) -> subprocess.Popen:
        """Starts argv on the host in the background. With no stdin of its own it runs under POPEN_WRAPPER (its
        pid in pidfile, if named; stopped when our ssh goes, or by end()). Given a stdin (a pipe: a dialogue
        with the caller) it reads ssh's own, and ends when that input ends."""
        if stdin is not subprocess.DEVNULL:
            return self.commands.popen(self.remote(argv, root), stdin=stdin, stdout=stdout, stderr=stderr)
        full = self.remote(["sh", "-c", POPEN_WRAPPER, "ccrig", pidfile or "", *argv], root)
        # ssh's stdin is a pipe whose write end only we hold (not the Popen's, so communicate() cannot close
        # it): EOF on the host then means our ssh or this process is gone, or end()/close_stdin() said stop.
        r, w = os.pipe()
        try:
            p = self.commands.popen(full, stdin=r, stdout=stdout, stderr=stderr)
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        self.keep[p.pid] = w
        return p

    def put(self, path: str, data: str | bytes, mode: int = 0o644, *, root: bool = True) -> None:
        """Writes a file on the host through a command's stdin: text as it is (so commands.log shows it), other
        bytes gzipped as base64 (a BPF object is mostly zeros)."""
        if isinstance(data, bytes):
            try:
                data = data.decode()
            except UnicodeDecodeError:
                text = base64.b64encode(gzip.compress(data, mtime=0)).decode() + "\n"
                self._write(path, "base64 -d | gzip -dc", text, mode, root)
                return
        self._write(path, "cat", data, mode, root)

    def remove_dir(self, path: str, timeout: float = 60) -> str:
        """Removes a run's directory on the host (never another filesystem mounted inside it), trying twice: a
        connection's hiccup is not a leftover. Returns "" once it is gone, else why not (rm's or ssh's words)."""
        why = ""
        for _ in range(2):
            try:
                p = self.run(["rm", "-rf", "--one-file-system", "--", path], check=False, timeout=timeout)
            except RunError as e:
                why = str(e)
                continue
            if p.returncode == 0:
                return ""
            why = p.stderr.strip() or f"exit {p.returncode}"
        return why

    def _write(self, path: str, decode: str, text: str, mode: int, root: bool) -> None:
        self.run(["sh", "-c", f'{decode} > "$1" && chmod {mode:o} "$1"', "put", path], root=root, input=text)

    def end(self, proc: subprocess.Popen) -> None:
        """Ends one background command the way the wrapper knows: EOF on its stdin, then SIGTERM there, so its
        last words still come back through ssh. One fed by the caller ends when the caller closes its input."""
        w = self.keep.pop(proc.pid, None)
        if w is not None:
            os.close(w)
        elif proc.stdin is not None:
            proc.stdin.close()

    def close_stdin(self) -> None:
        """Ends every background command still running through this connection (see POPEN_WRAPPER)."""
        for w in self.keep.values():
            try:
                os.close(w)
            except OSError:
                pass
        self.keep.clear()


# --- checks shared by the testbed, `ccrig provision` and `ccrig clean -i` -------------------------------

def connect_all(hosts: list[InventoryHost], commands: Commands, control_dir: Path,
                interfaces: dict[str, list[str]] | None = None,
                tools: tuple[str, ...] = (), within: float = 15.0) -> tuple[dict[str, SshHost], list[str]]:
    """Opens a connection to every host and checks it is usable: reachable, root (or sudo without a
    password), the named interfaces present, the tools installed. Returns the connections and the problems,
    each a sentence naming the host and the reason. Hosts are checked in parallel, each connection given
    `within` seconds."""
    conns = {h.name: SshHost(h, commands, control_dir) for h in hosts}

    def check(h: InventoryHost) -> list[str]:
        c = conns[h.name]
        err = c.open(within)
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


def unplayable(node: str, h: InventoryHost | None, inventory: Path) -> str | None:
    """Why host h cannot play node (None: it can): no host plays it, or the one that does is this machine."""
    if h is None:
        return f"node {node}: no inventory host plays it; add one with ccrig_node: {node} to {inventory}"
    if h.local:
        return (f"host {h.name} plays node {node} but has ansible_connection local; the hosts testbed reaches "
                f"every node over SSH (use the netns testbed on this machine)")
    return None


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
            why = unplayable(n, h, inv.path)
            if why:
                problems.append(why)
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
