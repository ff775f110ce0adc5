"""`ccrig provision -i INVENTORY`: Ansible provisioning of the hosts (ansible/site.yml, or teardown.yml).

    ccrig provision -i ansible/inventories/lab.yml            # install, build, configure; idempotent
    ccrig provision -i ansible/inventories/lab.yml --check    # what would change, changing nothing
    ccrig provision -i ansible/inventories/lab.yml --playbook teardown.yml

Before Ansible runs, every host is checked over SSH the way the hosts testbed checks it (reachable, root or
passwordless sudo, the interfaces the inventory names present), so a wrong inventory fails at once with each
host and reason named, and nothing was changed. Then ansible-playbook runs with the JSON-lines callback: each
task and each host's outcome is shown as progress, and a failure names the host, the task and Ansible's
message. A run that changed nothing says so.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import typer

from ccrig.topologies.testbeds.hosts import EXPERIMENT_GROUPS, Inventory, ansible_tool, connect_all
from ccrig.commands import Commands
from ccrig.errors import CcrigError, InputError, RunError

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"   # the repository's ansible/
PLAYBOOKS = ("site.yml", "teardown.yml")


@dataclass
class HostResult:
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0


@dataclass
class PlaybookResult:
    playbook: str
    hosts: dict[str, HostResult] = field(default_factory=dict)
    # (host, task, message) of every failure that was not rescued
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    changes: list[tuple[str, str]] = field(default_factory=list)  # (host, task) of every change
    outputs: dict[tuple[str, str], dict] = field(default_factory=dict)   # (host, task) -> its result, if ok

    @property
    def changed(self) -> int:
        return sum(h.changed for h in self.hosts.values())


def playbook_path(playbook: str) -> Path:
    p = Path(playbook)
    if p.is_file():
        return p.resolve()
    if (ANSIBLE_DIR / playbook).is_file():
        return ANSIBLE_DIR / playbook
    raise InputError(f"--playbook: got {playbook!r}; expected one of {', '.join(PLAYBOOKS)} (in {ANSIBLE_DIR}) "
                     f"or a playbook file")


def wanted_interfaces(inventory: Inventory) -> dict[str, list[str]]:
    """Every interface the inventory names on each host (experiment NICs, PAUSE NICs)."""
    out = {}
    for h in inventory.hosts.values():
        names = set(h.interfaces.values())
        if h.interface:
            names.add(h.interface)
        pause = h.vars.get("pause_interfaces") or []
        if not isinstance(pause, list):
            raise InputError(f"{inventory.path}: host {h.name}: pause_interfaces: got {pause!r}; expected a list "
                             f"of interface names")
        names.update(str(p) for p in pause)
        out[h.name] = sorted(names)
    return out


def check_hosts(inventory: Inventory, commands: Commands, interfaces: bool = True) -> None:
    """Raises InputError naming every host that cannot be provisioned, and why; changes nothing."""
    control = Path(tempfile.mkdtemp(prefix="ccrig-provision-check-"))
    conns = {}
    try:
        # the controller's own entries (ansible_connection: local) need no SSH
        remote = [h for h in inventory.hosts.values() if not h.local]
        conns, problems = connect_all(remote, commands, control,
                                      wanted_interfaces(inventory) if interfaces else None)
    finally:
        for c in conns.values():
            c.close()
        shutil.rmtree(control, ignore_errors=True)
    if problems:
        raise InputError(f"{inventory.path}: " + "; ".join(problems))


def run_playbook(inventory: Path, playbook: str = "site.yml", check: bool = False,
                 commands: Commands | None = None, echo=None, preflight: bool = True) -> PlaybookResult:
    """Checks the hosts, then runs the playbook; returns what happened on each host (raises on failure)."""
    commands = commands or Commands(None)
    echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    inv = Inventory.load(Path(inventory), commands)
    book = playbook_path(playbook)
    if not inv.experiment_hosts() and not inv.groups.get("fleet"):
        raise InputError(f"-i: {inventory}: no hosts to provision; expected hosts in the groups "
                         f"{', '.join(EXPERIMENT_GROUPS)} or fleet (see ansible/inventories/lab.example.yml, "
                         f"fleet.example.yml)")
    if preflight:
        check_hosts(inv, commands, interfaces=book.name != "teardown.yml")

    result, code, stderr = play(Path(inventory), book, commands, echo, ["--check"] if check else [])
    if result.failures:
        # hosts failing the same task the same way are named together
        grouped: dict[tuple[str, str], list[str]] = {}
        for h, t, m in result.failures:
            grouped.setdefault((t, m), []).append(h)
        lines = [f"{'host' if len(hs) == 1 else 'hosts'} {', '.join(hs)}, task {t!r}: {m}"
                 for (t, m), hs in grouped.items()]
        raise RunError(f"provision ({book.name}) failed: " + "; ".join(lines))
    if code != 0:
        last = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        raise RunError(f"provision ({book.name}): ansible-playbook exited {code}: "
                       f"{last[-1] if last else 'no message'}")
    return result


def play(inventory: Path, book: Path, commands: Commands, echo, args: list[str] = (),
         started=lambda proc: None) -> tuple[PlaybookResult, int, str]:
    """ansible-playbook BOOK on the inventory (args: more of its options: --check, -l, -e), its JSON-lines events
    read as they come: (what happened on each host, its exit status, its stderr). started(proc) is handed the
    process (to stop it from another thread)."""
    control = Path(tempfile.mkdtemp(prefix="ccrig-ansible-ssh-"))
    env = dict(os.environ,
               ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.jsonl",
               ANSIBLE_SSH_CONTROL_PATH_DIR=str(control),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               # the venv's Ansible tools before any other on PATH (ansible-playbook runs its helpers by name)
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    argv = [ansible_tool("ansible-playbook"), "-i", str(Path(inventory).resolve()), str(book), *args]
    commands.note(argv)   # started below with its own pipes, environment and directory
    result = PlaybookResult(book.name)
    t0 = time.monotonic()
    timed = lambda line: echo(f"[{time.monotonic() - t0:6.1f}s] {line}")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=ANSIBLE_DIR)
    started(proc)
    try:
        for line in proc.stdout:
            _event(line, result, timed)
        stderr = proc.stderr.read()
        proc.wait()
    except BaseException:
        proc.terminate()
        proc.wait(10)
        raise
    finally:
        _close_control(control, commands)
    commands.note(argv, str(proc.returncode))
    return result, proc.returncode, stderr


def _event(line: str, result: PlaybookResult, echo) -> None:
    try:
        ev = json.loads(line)
    except json.JSONDecodeError:
        return  # a plugin's stray print
    kind = ev.get("_event", "")
    task = _task_name(ev.get("task", {}))
    if kind in ("v2_playbook_on_task_start", "v2_playbook_on_handler_task_start"):
        echo(f"TASK {task}")
    elif kind.startswith("v2_runner_on_") or kind.startswith("v2_runner_item_on_"):
        for host, res in ev.get("hosts", {}).items():
            outcome = kind.rsplit("_", 1)[-1]
            if kind.startswith("v2_runner_item_on_"):
                continue  # the task's own event sums its items up
            if outcome == "ok":
                result.outputs[(host, task)] = res
            if outcome == "ok" and res.get("changed"):
                outcome = "changed"
                result.changes.append((host, task))
            elif outcome == "failed" and not res.get("_ansible_ignore_errors"):
                result.failures.append((host, task, _message(res)))
            elif outcome == "unreachable":
                result.failures.append((host, task, "unreachable: " + _message(res)))
            echo(f"  {outcome:<11} {host}")
    elif kind == "v2_playbook_on_stats":
        for host, s in ev.get("stats", {}).items():
            result.hosts[host] = HostResult(ok=s.get("ok", 0), changed=s.get("changed", 0),
                                            failed=s.get("failures", 0), unreachable=s.get("unreachable", 0),
                                            skipped=s.get("skipped", 0))
        # a failure inside a block whose rescue succeeded is not a failure of the host
        failed_hosts = {h for h, r in result.hosts.items() if r.failed or r.unreachable}
        result.failures = [f for f in result.failures if f[0] in failed_hosts]


def _task_name(task: dict) -> str:
    # a role's tasks come named "role : task" already
    return task.get("name", "")


def _message(res: dict) -> str:
    # a looped task's failure is in its failed items
    for item in res.get("results", []) or []:
        if isinstance(item, dict) and item.get("failed"):
            return _message(item)
    msg = str(res.get("msg", "")).strip()
    detail = str(res.get("stderr", "") or res.get("module_stderr", "")).strip()
    if msg in ("", "non-zero return code") and detail:
        msg = f"{msg}: {detail.splitlines()[-1]}" if msg else detail.splitlines()[-1]
    return " ".join(msg.split()) or "failed"


def _close_control(control: Path, commands: Commands) -> None:
    """Ends the SSH masters Ansible left to persist, so nothing of the run lingers."""
    for sock in control.glob("*"):
        commands.ok(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "ccrig"], timeout=10)
    shutil.rmtree(control, ignore_errors=True)


def provision(inventory: Path, check: bool = False, playbook: str = "site.yml") -> int:
    """Provisions the inventory's hosts with progress on stderr; 0 on success (errors raise CcrigError)."""
    result = run_playbook(inventory, playbook, check)
    changed = {h: r.changed for h, r in result.hosts.items() if r.changed}
    what = "would change" if check else "changed"
    if changed:
        print(f"{result.playbook}: {what} " + ", ".join(f"{h}: {n}" for h, n in sorted(changed.items())),
              file=sys.stderr)
    else:
        print(f"{result.playbook}: no change on {len(result.hosts)} host(s)", file=sys.stderr)
    return 0


app = typer.Typer(add_completion=False, rich_markup_mode=None,
                  help="Provision hosts with Ansible (ansible/site.yml): tools, laws, PAUSE, metrics, iperf3.")


@app.callback(invoke_without_command=True)
def provision_command(
        inventory: Path = typer.Option(..., "-i", "--inventory", help="an Ansible inventory (file or directory)"),
        check: bool = typer.Option(False, "--check", help="show what would change, change nothing"),
        playbook: str = typer.Option("site.yml", "--playbook", help="site.yml, teardown.yml or a playbook file")):
    """Runs the playbook on the inventory's hosts after checking each is reachable, has root and its NICs."""
    try:
        code = provision(inventory, check, playbook)
    except CcrigError as e:
        typer.echo(f"ccrig provision: {e}", err=True)
        raise typer.Exit(e.exit_code)
    raise typer.Exit(code)
