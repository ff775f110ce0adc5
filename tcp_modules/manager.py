"""Loads the congestion controls an experiment's flows ask for, and removes them afterwards.

Each cc value (see spec.py) takes one of three forms:
- builtin: a name the kernel offers (tcp_available_congestion_control), or a kernel module tcp_NAME it can load;
- kmod: the tcp_alphabeta / tcp_poly modules, built against /lib/modules/$(uname -r)/build and inserted;
  presets by their own names, one other parameterisation per law through ab_param / poly_param (module
  parameters, which a connection reads when it starts);
- bpf: a variant of build/tcp_{alphabeta,poly}.bpf.o registered with `bpftool struct_ops register`, any
  number of parameterisations, each under a generated name `cr{a|p}_{PPPP}_{HHHHHH}`: a for alphabeta, p for
  poly, PPPP four hex digits of the manager's prefix, HHHHHH six of the parameters (and of the host, on a
  remote system) — recognisable by `cleanup()`, at most 15 characters (TCP_CA_NAME_MAX).

`prefer` auto takes kmod where the kernel loads modules and has headers, BPF otherwise. What is loaded is
recorded in STATE_DIR (a tmpfs, like the registrations themselves), so `ccrig cc list` and `cleanup()` know
it even after the process that loaded it is gone.

Where: a manager works on one System — this machine (LocalSystem) or a host reached over SSH (RemoteSystem, the
hosts testbed). Everything it reads, writes and runs goes through that object, so the code is one path. On a
host, BPF variants are still made here (the objects are CO-RE, so one build serves every kernel with BTF) and
shipped; the kernel modules are the ones the `tcp_modules` Ansible role built there (its tcp_modules_dir);
STATE_DIR is the host's. Each host's variants carry the host's name in their parameter tag, so hosts sharing
one kernel (the project's one-machine test bed) never register the same name, while the prefix tag stays the
run's and `ccrig clean --prefix` finds them all. CcSet holds one manager per system for a run.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import platform
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from . import bpfobj, laws
from .spec import Cc, cc_key, law_of, parse_cc, preset_of

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
KMOD_DIR = HERE / "kmod"
DEFAULT_STATE_DIR = Path("/run/ccrig/cc")
STATE_DIR = Path(os.environ.get("CCRIG_CC_STATE", str(DEFAULT_STATE_DIR)))
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
BTF = Path("/sys/kernel/btf/vmlinux")
MODULE = {"alphabeta": "tcp_alphabeta", "poly": "tcp_poly"}
PARAM_INSTANCE = {"alphabeta": "ab_param", "poly": "poly_param"}
MODULE_PARAMS = {"alphabeta": ("alpha", "beta"), "poly": ("alpha", "beta", "k", "l", "terms", "per_ack")}
NAME_RE = re.compile(r"^cr([ap])_([0-9a-f]{4})_([0-9a-f]{6})$")
PREFERS = ("auto", "kmod", "bpf")


# --- where: this machine or a host ---------------------------------------------------------------------------

class System:
    """The machine whose kernel a manager prepares: a few primitives (run, read, exists, write, remove, list,
    which, release) and what is derived from them. Paths are that machine's."""
    local = True
    name = ""                  # the host's name ("" here): part of the generated names
    where = "this machine"
    state_dir = STATE_DIR
    kmod_dir = KMOD_DIR

    def run(self, argv: list[str], check: bool = True, timeout: float = 60, input: str | None = None):
        raise NotImplementedError

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
    """This machine, through the run's Commands (so every command lands in commands.log)."""

    def __init__(self, commands: Commands | None = None):
        self.commands = commands or Commands(None)

    def run(self, argv, check=True, timeout=60, input=None):
        return self.commands.run(argv, check=check, timeout=timeout, input=input)

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
    """A host, through a connection whose run(argv, check=, timeout=, input=) runs argv there as root (the
    hosts testbed's SshHost). Files travel as text on the command's stdin (gzip + base64: a BPF object is
    binary, and the text is what commands.log keeps)."""
    local = False
    state_dir = DEFAULT_STATE_DIR

    def __init__(self, conn, name: str, kmod_dir: Path | str | None = None):
        self.conn = conn
        self.name = name
        self.where = f"host {name}"
        if kmod_dir is not None:
            self.kmod_dir = Path(kmod_dir)
        self._release: str | None = None

    @classmethod
    def of(cls, host, conn) -> "RemoteSystem":
        """The system of an inventory host (topologies.testbeds.hosts.InventoryHost) over its connection: its kernel
        modules are where the tcp_modules role built them."""
        return cls(conn, host.name, Path(host.tcp_modules_dir) / "kmod")

    def run(self, argv, check=True, timeout=60, input=None):
        return self.conn.run(list(argv), check=check, timeout=timeout, input=input)

    def read(self, path):
        try:
            p = self.run(["cat", "--", str(path)], check=False, timeout=20)
        except RunError:
            return None
        return p.stdout if p.returncode == 0 else None

    def exists(self, path):
        return self.ok(["test", "-e", str(path)], timeout=20)

    def write(self, path, data):
        text = base64.b64encode(gzip.compress(data, mtime=0)).decode()
        self.run(["sh", "-c", 'mkdir -p -- "${1%/*}" && base64 -d | gzip -dc > "$1"', "write", str(path)],
                 input=text + "\n")

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
        return True   # the connection runs commands as root (checked when it was opened)

    def sha256(self, path):
        p = self.run(["sha256sum", "--", str(path)], check=False, timeout=30)
        return p.stdout.split()[0] if p.returncode == 0 and p.stdout.strip() else None


def as_system(x) -> System:
    """A System from a System or a Commands (this machine)."""
    return x if isinstance(x, System) else LocalSystem(x)


def available() -> list[str]:
    """The congestion controls this machine's kernel offers now."""
    return LocalSystem().available()


def prefix_tag(prefix: str) -> str:
    return hashlib.sha1(prefix.encode()).hexdigest()[:4]


def generated_name(prefix: str, law: laws.Law, host: str = "") -> str:
    """cr{a|p}_{prefix tag}_{parameter tag}: the same parameters under one prefix (on one host) get the same
    name; on another host another name, with the same prefix tag."""
    params = json.dumps(law.params(), sort_keys=True) + (f"@{host}" if host else "")
    return f"cr{law.law[0]}_{prefix_tag(prefix)}_{hashlib.sha1(params.encode()).hexdigest()[:6]}"


def kernel_release() -> str:
    return platform.release()


def modules_supported() -> bool:
    return LocalSystem().modules_supported()


def kdir() -> Path:
    return LocalSystem().kdir()


def module_loaded(module: str) -> bool:
    return LocalSystem().module_loaded(module)


@dataclass
class Loaded:
    """One cc value as prepared: where it came from and what the kernel calls it."""
    key: str
    form: str                      # builtin | kmod | bpf
    kernel_name: str
    law: laws.Law | None = None
    object: Path | None = None
    sha256: str | None = None
    bpf_id: int | None = None
    extra: dict = field(default_factory=dict)

    def describe(self) -> dict:
        d = {"key": self.key, "form": self.form, "kernel_name": self.kernel_name,
             "parameters": self.law.params() if self.law else None}
        if self.object:
            d["object"] = str(self.object)
            d["sha256"] = self.sha256
        d.update(self.extra)
        return d


# --- bpftool ----------------------------------------------------------------------------------------------

def struct_ops_maps(system) -> list[tuple[int, str]]:
    """(map id, congestion-control name) of every registered BPF congestion control (system: a System, or
    a Commands for this machine)."""
    proc = as_system(system).run(["bpftool", "-j", "struct_ops", "dump"], check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    out, dec, s, i, objs = [], json.JSONDecoder(), proc.stdout, 0, []
    # bpftool prints one JSON array of alternating map-info and value objects (some versions several)
    while i < len(s):
        while i < len(s) and s[i].isspace():
            i += 1
        if i >= len(s):
            break
        try:
            o, i = dec.raw_decode(s, i)
        except json.JSONDecodeError:
            break
        objs.extend(o if isinstance(o, list) else [o])
    map_id = None
    for o in objs:
        if "bpf_map_info" in o:
            map_id = o["bpf_map_info"].get("id")
        elif "bpf_struct_ops_tcp_congestion_ops" in o and map_id is not None:
            out.append((map_id, o["bpf_struct_ops_tcp_congestion_ops"]["data"]["name"]))
            map_id = None
    return out


def _unregister_id(system, map_id: int) -> bool:
    return as_system(system).ok(["bpftool", "struct_ops", "unregister", "id", str(map_id)])


def _rmmod(system, module: str, tries: int = 20) -> bool:
    # sockets that used the module hold a reference until they are destroyed: give them a moment
    s = as_system(system)
    for _ in range(tries):
        if not s.module_loaded(module) or s.ok(["rmmod", module]):
            return True
        time.sleep(0.25)
    return False


# --- the manager -------------------------------------------------------------------------------------------

class CcManager:
    def __init__(self, commands: Commands, prefix: str, prefer: str = "auto", kmod_dir: Path | None = None,
                 system: System | None = None):
        if prefer not in PREFERS:
            raise InputError(f"prefer: got {prefer!r}; expected one of {', '.join(PREFERS)}")
        self.commands = commands          # this machine's: builds the BPF objects (or, here, the modules)
        self.system = system or LocalSystem(commands)
        self.prefix = prefix
        self.prefer = prefer
        # where the .ko are (Kbuild's output, tcp_modules/kmod; on a host the tcp_modules role's); another
        # folder for a read-only tree
        self.kmod_dir = Path(kmod_dir) if kmod_dir else self.system.kmod_dir
        self.loaded: dict[str, Loaded] = {}
        self._inserted: list[str] = []               # modules this manager inserted
        self._saved_params: dict[str, dict] = {}     # module -> parameter values it found, to restore

    # planning -------------------------------------------------------------------------------------------
    def _kmod_possible(self) -> list[str]:
        """Why kernel modules cannot be used here (empty: they can)."""
        s, why = self.system, []
        if not s.modules_supported():
            why.append(f"kernel {s.release()} cannot load modules (no /proc/modules)")
        elif not self._kmod_built():
            if not s.local:
                why.append(f"{s.where} has no laws' modules built for kernel {s.release()} in {self.kmod_dir} "
                           f"(`ccrig provision -i INVENTORY` builds them where the kernel's headers are)")
            elif not s.exists(s.kdir() / "Makefile"):
                why.append(f"no kernel headers for {s.release()} at {s.kdir()} "
                           f"(Debian: apt-get install linux-headers-{s.release()})")
        if not s.is_root():
            why.append("inserting a module needs root")
        return why

    def _kmod_built(self) -> bool:
        """Both modules are built, for this kernel (modinfo's vermagic starts with its release)."""
        s = self.system
        for module in MODULE.values():
            ko = self.kmod_dir / f"{module}.ko"
            if not s.exists(ko):
                return False
            out = s.run(["modinfo", "-F", "vermagic", str(ko)], check=False).stdout
            if not out.startswith(s.release() + " "):
                return False
        return True

    def _bpf_possible(self) -> list[str]:
        s, why = self.system, []
        if not s.exists(BTF):
            why.append(f"kernel {s.release()} has no BTF ({BTF} missing; needs CONFIG_DEBUG_INFO_BTF=y)")
        if not s.which("bpftool"):
            why.append("bpftool is not installed " + ("(Debian: apt-get install bpftool, or `make deps`)" if s.local
                                                      else f"on {s.where} (`ccrig provision -i INVENTORY`)"))
        # the variants are made from this machine's build, wherever they are registered
        if not all((BUILD / o).exists() for o in bpfobj.OBJECT.values()):
            missing = [t for t in ("clang", "llvm-strip") if shutil.which(t) is None]
            if missing:
                why.append(f"the BPF objects are not built and {', '.join(missing)} is missing "
                           f"(Debian: apt-get install clang llvm, or `make deps`)")
        if not s.is_root():
            why.append("registering a BPF congestion control needs root")
        return why

    def _plan(self, ccs) -> tuple[list[tuple[str, Cc, str]], list[str]]:
        """[(key, cc, form)] for the distinct cc values, and the problems found."""
        s = self.system
        problems: list[str] = []
        items: dict[str, tuple[str, Cc, str]] = {}
        for raw in ccs:
            cc = parse_cc(raw)
            items.setdefault(cc_key(cc), (cc_key(cc), cc, ""))
        if not items:
            return [], []
        kmod_why = self._kmod_possible() if self.prefer in ("auto", "kmod") else ["bpf preferred"]
        bpf_why = self._bpf_possible() if self.prefer in ("auto", "bpf") else ["kmod preferred"]
        custom_used: dict[str, str] = {}
        have = set(s.available())
        plan = []
        for key, cc, _ in items.values():
            law = law_of(cc)
            if law is None:
                if key not in have and not self._module_for_builtin(key):
                    problems.append(
                        f"cc {key!r}: kernel {s.release()} does not offer it (available: {' '.join(sorted(have))})"
                        + ("" if s.modules_supported() else " and cannot load modules")
                        + "; use one of those, a law preset or parameterisation, or the vm testbed "
                          "(a distribution kernel with every module)")
                plan.append((key, cc, "builtin"))
                continue
            form = None
            if not kmod_why:
                preset = preset_of(law)
                if preset is not None:
                    form = "kmod"
                elif custom_used.setdefault(law.law, key) == key:
                    form = "kmod"
            if form is None and not bpf_why:
                form = "bpf"
            if form is None:
                if self.prefer == "kmod" and not kmod_why:
                    problems.append(
                        f"cc {key!r}: module {MODULE[law.law]} offers one tunable instance "
                        f"({PARAM_INSTANCE[law.law]}), already taken by {custom_used[law.law]!r}; "
                        f"use prefer: bpf or auto for several parameterisations of one law")
                else:
                    why = (kmod_why if self.prefer == "kmod" else bpf_why if self.prefer == "bpf"
                           else kmod_why + bpf_why)
                    problems.append(
                        f"cc {key!r} cannot be loaded on kernel {s.release()}: {'; '.join(why)}; "
                        f"way out: the vm testbed (a distribution kernel with modules and headers)"
                        + (", or prefer: auto" if self.prefer != "auto" else ""))
                form = "none"
            plan.append((key, cc, form))
        return plan, problems

    def _module_for_builtin(self, name: str) -> bool:
        return self.system.modules_supported() and self.system.ok(["modinfo", "-n", f"tcp_{name}"])

    def preflight(self, ccs) -> list[str]:
        """Problems that would stop prepare(ccs), each a sentence with the way out. Loads nothing."""
        return self._plan(ccs)[1]

    # loading ----------------------------------------------------------------------------------------------
    def prepare(self, ccs) -> dict[str, str]:
        """Loads what the cc values need; returns {cc_key: kernel name for iperf3 -C}."""
        plan, problems = self._plan(ccs)
        if problems:
            raise InputError("; ".join(problems))
        try:
            for key, cc, form in plan:
                if key in self.loaded:
                    continue
                if form == "builtin":
                    self.loaded[key] = self._builtin(key)
                elif form == "kmod":
                    self.loaded[key] = self._kmod(key, law_of(cc))
                else:
                    self.loaded[key] = self._bpf(key, law_of(cc))
            have = set(self.system.available())
            for item in self.loaded.values():
                if item.kernel_name not in have:
                    raise RunError(f"cc {item.key!r}: loaded as {item.form} {item.kernel_name!r}, but the kernel "
                                   f"does not list it in {AVAILABLE}")
        except BaseException:   # Ctrl-C too: nothing half-loaded stays behind
            self.release()
            raise
        return {key: item.kernel_name for key, item in self.loaded.items()}

    def _builtin(self, name: str) -> Loaded:
        extra = {}
        if name not in self.system.available():
            self.system.run(["modprobe", f"tcp_{name}"])
            self._inserted.append(f"tcp_{name}")
            extra["module"] = f"tcp_{name}"
        return Loaded(name, "builtin", name, extra=extra)

    def _ensure_built(self, what: str) -> None:
        """Builds tcp_modules' BPF objects or (for this machine) its modules, here."""
        argv = ["make", "-C", str(HERE), what]
        if what == "modules":
            argv.append(f"KDIR={kdir()}")
        self.commands.run(argv, timeout=600)

    def _kmod(self, key: str, law: laws.Law) -> Loaded:
        s, module = self.system, MODULE[law.law]
        ko = self.kmod_dir / f"{module}.ko"
        if not s.module_loaded(module):
            if not self._kmod_built():
                if not s.local:
                    raise RunError(f"{s.where}: module {ko} is not built (run `ccrig provision -i INVENTORY`)")
                self._ensure_built("modules")
            s.run(["insmod", str(ko)])
            self._inserted.append(module)
            self._record(f"kmod-{module}", {"module": module, "prefix": self.prefix})
        preset = preset_of(law)
        if preset is not None:
            name = preset
        else:
            name = PARAM_INSTANCE[law.law]
            self._set_module_params(module, law)
        digest = s.sha256(ko)
        return Loaded(key, "kmod", name, law, ko if digest else None, digest, extra={"module": module})

    def _set_module_params(self, module: str, law: laws.Law) -> None:
        pdir = Path("/sys/module") / module / "parameters"
        p = law.params()
        if module not in self._saved_params:
            self._saved_params[module] = {n: (self.system.read(pdir / n) or "").strip()
                                          for n in MODULE_PARAMS[law.law]}
        for n in MODULE_PARAMS[law.law]:
            v = p[n]
            text = str(int(v)) if isinstance(v, bool) else (f"{v:.9f}" if isinstance(v, float) else str(v))
            self.system.run(["tee", str(pdir / n)], input=text + "\n")

    def _bpf(self, key: str, law: laws.Law) -> Loaded:
        s = self.system
        template = BUILD / bpfobj.OBJECT[law.law]
        if not template.exists():
            self._ensure_built("bpf")
        name = generated_name(self.prefix, law, s.name)
        data = bpfobj.variant(template, law, name)
        obj = s.state_dir / f"{name}.bpf.o"
        s.write(obj, data)
        if name in s.available():
            # ours (same prefix, same parameters) left by a run that died: replace it
            for map_id, cc_name in struct_ops_maps(s):
                if cc_name == name:
                    _unregister_id(s, map_id)
        proc = s.run(["bpftool", "struct_ops", "register", str(obj)])
        m = re.search(r"\bid (\d+)", proc.stdout + proc.stderr)
        map_id = int(m.group(1)) if m else next((i for i, n in struct_ops_maps(s) if n == name), None)
        item = Loaded(key, "bpf", name, law, obj, bpfobj.sha256(data), map_id,
                      extra={"template": str(template), "template_sha256": bpfobj.sha256(template.read_bytes())})
        self._record(name, {**item.describe(), "prefix": self.prefix, "bpf_id": map_id})
        return item

    def _record(self, stem: str, data: dict) -> None:
        self.system.write(self.system.state_dir / f"{stem}.json", json.dumps(data, indent=1).encode())

    # teardown -----------------------------------------------------------------------------------------------
    def release(self) -> list[str]:
        """Removes everything this manager loaded; returns what it could not remove (empty: all gone)."""
        s, left = self.system, []
        for item in list(self.loaded.values()):
            if item.form == "bpf":
                ok = item.bpf_id is not None and _unregister_id(s, item.bpf_id)
                if not ok:
                    ok = all(_unregister_id(s, i) for i, n in struct_ops_maps(s) if n == item.kernel_name)
                if item.kernel_name in s.available():
                    left.append(f"BPF congestion control {item.kernel_name}"
                                + ("" if s.local else f" on {s.where}"))
                s.remove(s.state_dir / f"{item.kernel_name}.bpf.o", s.state_dir / f"{item.kernel_name}.json")
        for module, values in self._saved_params.items():
            if module in self._inserted or not s.module_loaded(module):
                continue
            for n, v in values.items():
                try:
                    s.run(["tee", str(Path("/sys/module") / module / "parameters" / n)], check=False, input=v + "\n")
                except RunError:
                    pass
        for module in reversed(self._inserted):
            if _rmmod(s, module):
                s.remove(s.state_dir / f"kmod-{module}.json")
            else:
                left.append(f"module {module} (still in use)" + ("" if s.local else f" on {s.where}"))
        self.loaded.clear()
        self._inserted.clear()
        self._saved_params.clear()
        return left

    def describe(self) -> list[dict]:
        """What was loaded, for env.json: form, kernel name, parameters, object and its sha256."""
        return [item.describe() for item in self.loaded.values()]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


class CcSet:
    """The congestion controls of a run on every system its flows send from: one CcManager per key (a sender
    node on the hosts testbed, each with its host's system; None for this machine). Every system is checked
    before anything is loaded anywhere; a failure or Ctrl-C while loading releases what was loaded."""

    def __init__(self, commands: Commands, prefix: str, prefer: str, systems: dict):
        self.managers = {key: CcManager(commands, prefix, prefer, system=system) for key, system in systems.items()}
        self.names: dict = {}

    def _each(self, fn) -> list:
        """fn(key, manager) for every manager, the hosts' in parallel (each waits on its own SSH round trips);
        results in order; the first error is raised once all are done."""
        items = list(self.managers.items())
        if len(items) <= 1:
            return [fn(*kv) for kv in items]
        with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
            return list(pool.map(lambda kv: fn(*kv), items))

    def prepare(self, ccs: dict) -> dict:
        """ccs: {key: cc values}; returns {key: {cc_key: kernel name}}."""
        def check(key, m):
            return [p if m.system.local else f"{m.system.where}: {p}" for p in m.preflight(ccs.get(key, []))]
        problems = [p for found in self._each(check) for p in found]
        if problems:
            raise InputError("; ".join(problems))

        def load(key, m):
            self.names[key] = m.prepare(ccs.get(key, []))
        try:
            self._each(load)
        except BaseException:
            self.release()
            raise
        return self.names

    def kernel_name(self, key, label: str) -> str:
        """The kernel's name for cc `label` on key's system (this machine's when key has none of its own)."""
        return self.names[key if key in self.names else None][label]

    def release(self) -> list[str]:
        def release(key, m):
            try:
                return m.release()
            except Exception as e:  # a host gone away must not keep the others loaded
                return [f"what was loaded on {m.system.where} ({e})"]
        return [what for left in self._each(release) for what in left]

    def describe(self):
        """For env.json: this machine's list, or per host its node, kernel and what was loaded there."""
        if set(self.managers) == {None}:
            return self.managers[None].describe()
        return {m.system.name: {"node": key, "kernel": m.system.release(), "loaded": m.describe()}
                for key, m in self.managers.items()}


# --- `ccrig clean` ---------------------------------------------------------------------------------------------

def _recorded_prefixes(s: System) -> dict[str, str]:
    """{generated name: prefix of the manager that loaded it}, from the system's STATE_DIR records."""
    out = {}
    for f in s.listdir(s.state_dir):
        if f.startswith("cr") and f.endswith(".json"):
            try:
                out[f.split(".")[0]] = json.loads(s.read(s.state_dir / f) or "{}").get("prefix", "")
            except ValueError:
                pass
    return out


def cleanup(system, prefix: str | None = None, keep=None) -> list[str]:
    """Removes every BPF variant ccrig registered (only those of `prefix` if given), and the modules ccrig
    inserted (with a prefix: those that prefix's run inserted). keep(prefix) -> True spares what a manager
    with that prefix loaded (a run still going). system: a System (a host's) or a Commands (this machine).
    Returns one sentence per thing removed (naming the host on a remote system)."""
    s = as_system(system)
    on = "" if s.local else f" on {s.where}"
    said = []
    tag = prefix_tag(prefix) if prefix is not None else None
    owners = _recorded_prefixes(s)
    if s.which("bpftool"):
        for map_id, name in struct_ops_maps(s):
            m = NAME_RE.match(name)
            if m and keep is not None and keep(owners.get(name, "")):
                said.append(f"kept BPF congestion control {name}{on}"
                            + (f": {owners[name]} still uses it" if owners.get(name) else ""))
                continue
            if m and (tag is None or m.group(2) == tag):
                if _unregister_id(s, map_id):
                    said.append(f"unregistered BPF congestion control {name}{on}")
                else:
                    said.append(f"could not unregister BPF congestion control {name}{on} (map id {map_id})")
    files = s.listdir(s.state_dir)
    if files:
        still = set(s.available())
        stale = []
        for f in files:
            name = f.split(".")[0]
            m = NAME_RE.match(name)
            if m and name not in still and (tag is None or m.group(2) == tag):
                stale.append(s.state_dir / f)
        s.remove(*stale)
        for f in files:
            if not (f.startswith("kmod-") and f.endswith(".json")):
                continue
            try:
                info = json.loads(s.read(s.state_dir / f) or "{}")
            except ValueError:
                info = {}
            if prefix is not None and info.get("prefix") != prefix:
                continue
            if keep is not None and keep(info.get("prefix", "")):
                continue
            module = info.get("module", f[:-len(".json")].removeprefix("kmod-"))
            if _rmmod(s, module, tries=4):
                said.append(f"removed module {module}{on}")
                s.remove(s.state_dir / f)
            else:
                said.append(f"could not remove module {module}{on} (still in use)")
    # with no record to go by, a full clean here removes the laws' modules; a host's were inserted by
    # `ccrig provision` on purpose (teardown.yml removes them), so they stay
    if prefix is None and keep is None and s.local and s.modules_supported():
        for module in MODULE.values():
            if s.module_loaded(module):
                if _rmmod(s, module, tries=4):
                    said.append(f"removed module {module}")
                else:
                    said.append(f"could not remove module {module} (still in use)")
    return said
