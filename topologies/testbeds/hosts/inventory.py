"""The Ansible inventory as the hosts testbed reads it: which machine plays which topology node, how to reach
it, and which of its NICs is cabled toward which neighbour (the variables are listed in the package's
docstring). It is read through `ansible-inventory --list`, so INI, YAML, directories and group_vars all work
as they do for Ansible itself."""
from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ccrig.commands import Commands
from ccrig.errors import InputError

# the repository (this file is topologies/testbeds/hosts/inventory.py): ansible/ is at its root
PROJECT = Path(__file__).resolve().parents[3]
TCP_MODULES_DEFAULTS = PROJECT / "ansible" / "roles" / "tcp_modules" / "defaults" / "main.yml"
INVENTORY_ENV = "CCRIG_INVENTORY"  # the inventory a `testbed: hosts` run uses when none is passed
EXPERIMENT_GROUPS = ("senders", "receivers", "routers")  # the inventory groups whose hosts play nodes
BOTTLENECK_MODES = ("router", "switch")


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


def inventory_path(inventory: Path | str | None) -> Path:
    """The inventory a `testbed: hosts` run uses: the one given, else $CCRIG_INVENTORY."""
    if inventory is None:
        inventory = os.environ.get(INVENTORY_ENV)
        if not inventory:
            raise InputError(f"testbed: got 'hosts' with no inventory; expected an Ansible inventory "
                             f"(set {INVENTORY_ENV}=PATH, e.g. ansible/inventories/lab.example.yml)")
    return Path(inventory)


def ansible_tool(name: str) -> str:
    """An Ansible command from the environment ccrig runs in (the venv's bin), else from PATH."""
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
