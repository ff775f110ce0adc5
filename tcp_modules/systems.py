"""The machine whose kernel a law manager prepares: this machine (LocalSystem) or a host reached over SSH
(RemoteSystem, the hosts testbed). Both run their commands through a ccrig.commands.Node — ccrig.commands.Local
for this machine (or one of its namespaces: they share its kernel), a testbed's node, an SSH host — so every
argv lands in commands.log and the manager's code is one path whatever the machine.

A System adds what the manager reads and writes there (files, tools, the kernel's release), each through the
fewest primitives, and what is derived from them (the congestion controls the kernel offers, module support).
Paths are that machine's.
"""
from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

from ccrig.commands import Commands, Local, Node
from ccrig.errors import RunError
from . import bpfobj

HERE = Path(__file__).resolve().parent
KMOD_DIR = HERE / "kmod"
DEFAULT_STATE_DIR = Path("/run/ccrig/cc")
# what is loaded is recorded here (a tmpfs, like the registrations themselves), so `ccrig cc list` and
# cleanup know it after the process that loaded it is gone
STATE_DIR = Path(os.environ.get("CCRIG_CC_STATE", str(DEFAULT_STATE_DIR)))
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


class System:
    """The machine whose kernel a manager prepares: its node (where commands run), a few primitives (read,
    exists, write, remove, listdir, which, release, is_root, sha256) and what is derived from them."""
    local = True
    name = ""                  # the host's name ("" here): part of the generated names
    where = "this machine"
    state_dir = STATE_DIR
    kmod_dir = KMOD_DIR

    def __init__(self, node: Node):
        self.node = node

    def run(self, argv: list[str], check: bool = True, timeout: float = 60, input: str | None = None):
        return self.node.run(list(argv), check=check, timeout=timeout, input=input)

    def read(self, path: Path) -> str | None:
        raise NotImplementedError

    def exists(self, path: Path) -> bool:
        raise NotImplementedError

    def write(self, path: Path, data: bytes) -> None:
        raise NotImplementedError

    def remove(self, *paths: Path) -> None:
        raise NotImplementedError

    def listdir(self, path: Path) -> list[str]:
        raise NotImplementedError

    def which(self, tool: str) -> bool:
        raise NotImplementedError

    def release(self) -> str:
        raise NotImplementedError

    def is_root(self) -> bool:
        raise NotImplementedError

    def sha256(self, path: Path) -> str | None:
        raise NotImplementedError

    # derived ------------------------------------------------------------------------------------------
    def ok(self, argv: list[str], timeout: float = 60) -> bool:
        try:
            return self.run(argv, check=False, timeout=timeout).returncode == 0
        except RunError:
            return False

    def available(self) -> list[str]:
        """The congestion controls the kernel offers now."""
        return (self.read(AVAILABLE) or "").split()

    def modules_supported(self) -> bool:
        return self.exists(Path("/proc/modules"))

    def module_loaded(self, module: str) -> bool:
        return self.exists(Path("/sys/module") / module / "initstate")

    def kdir(self) -> Path:
        return Path("/lib/modules") / self.release() / "build"


class LocalSystem(System):
    """This machine: commands through its node (Local(commands), or a namespace of it: one kernel for all),
    files read and written directly."""

    def __init__(self, node: Node | None = None):
        super().__init__(node or Local(Commands(None)))

    def read(self, path):
        try:
            return Path(path).read_text()
        except OSError:
            return None

    def exists(self, path):
        return Path(path).exists()

    def write(self, path, data):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)

    def remove(self, *paths):
        for p in paths:
            Path(p).unlink(missing_ok=True)

    def listdir(self, path):
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def which(self, tool):
        return shutil.which(tool) is not None

    def release(self):
        return platform.release()

    def is_root(self):
        return os.geteuid() == 0

    def sha256(self, path):
        try:
            return bpfobj.sha256(Path(path).read_bytes())
        except OSError:
            return None


class RemoteSystem(System):
    """A host, through a node whose run(argv, check, timeout, input) runs argv there as root and whose
    put(path, data, mode) writes a file there (the hosts testbed's SSH host)."""
    local = False
    state_dir = DEFAULT_STATE_DIR

    def __init__(self, node: Node, name: str, kmod_dir: Path | str | None = None):
        super().__init__(node)
        self.name = name
        self.where = f"host {name}"
        if kmod_dir is not None:
            self.kmod_dir = Path(kmod_dir)
        self._release: str | None = None
        self._dirs: set[str] = set()   # directories made there already (one round trip fewer per file)

    @classmethod
    def of(cls, host, node: Node) -> "RemoteSystem":
        """The system of an inventory host (topologies.testbeds.hosts.InventoryHost) over its node: its kernel
        modules are where the tcp_modules role built them."""
        return cls(node, host.name, Path(host.tcp_modules_dir) / "kmod")

    def read(self, path):
        try:
            p = self.run(["cat", "--", str(path)], check=False, timeout=20)
        except RunError:
            return None
        return p.stdout if p.returncode == 0 else None

    def exists(self, path):
        return self.ok(["test", "-e", str(path)], timeout=20)

    def write(self, path, data):
        parent = str(Path(path).parent)
        if parent not in self._dirs:
            self.run(["mkdir", "-p", "--", parent], timeout=20)
            self._dirs.add(parent)
        self.node.put(str(path), data, 0o644)

    def remove(self, *paths):
        if paths:
            self.run(["rm", "-f", "--", *map(str, paths)], check=False, timeout=20)

    def listdir(self, path):
        p = self.run(["ls", "-1A", "--", str(path)], check=False, timeout=20)
        return sorted(p.stdout.splitlines()) if p.returncode == 0 else []

    def which(self, tool):
        # sudo's secure_path and root's PATH have the sbin directories; a plain login's may not
        return self.ok(["sh", "-c", 'PATH=$PATH:/usr/sbin:/sbin command -v "$1"', "which", tool], timeout=20)

    def release(self):
        if self._release is None:
            self._release = self.run(["uname", "-r"], timeout=20).stdout.strip()
        return self._release

    def is_root(self):
        return True   # the node runs commands as root (checked when its connection was opened)

    def sha256(self, path):
        p = self.run(["sha256sum", "--", str(path)], check=False, timeout=30)
        return p.stdout.split()[0] if p.returncode == 0 and p.stdout.strip() else None


def as_system(x) -> System:
    """A System from a System or a Commands (this machine)."""
    return x if isinstance(x, System) else LocalSystem(Local(x))


# this machine's, for `ccrig cc` and the tests ----------------------------------------------------------------

def available() -> list[str]:
    """The congestion controls this machine's kernel offers now."""
    return LocalSystem().available()


def kernel_release() -> str:
    return platform.release()


def modules_supported() -> bool:
    return LocalSystem().modules_supported()


def kdir() -> Path:
    return LocalSystem().kdir()


def module_loaded(module: str) -> bool:
    return LocalSystem().module_loaded(module)
