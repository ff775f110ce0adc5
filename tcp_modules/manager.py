"""Loads the congestion controls an experiment's flows ask for, and removes them afterwards.

Each cc value (see spec.py) takes one of three forms:
- builtin: a name the kernel offers (tcp_available_congestion_control), or a kernel module tcp_NAME it can load;
- kmod: the families' kernel modules, tcp_NAME (kmod.py): presets by their own names, one other
  parameterisation per family;
- bpf: a variant of the families' BPF struct_ops objects (bpf.py), any number of parameterisations, each under a
  generated name.

`prefer` auto takes kmod where the kernel loads modules and has headers, BPF otherwise. What is loaded is
recorded in the system's STATE_DIR (loaded.py), so `ccrig cc list` and cleanup (leftovers.py) know it even after
the process that loaded it is gone.

Where: a manager works on one System (systems.py) — this machine or a host reached over SSH (the hosts
testbed). Everything it reads, writes and runs goes through that object, so the code is one path. CcSet holds
one manager per system for a run.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ccrig.commands import Commands, Local
from ccrig.errors import InputError, RunError
from ccrig.machine import cache_lock
from . import bpf
from .bpf import BUILD, NAME_RE, generated_name, prefix_tag, struct_ops_maps
from .kmod import MODULE, PARAM_INSTANCE, Modules
from .leftovers import cleanup
from .loaded import Loaded
from .spec import Cc, cc_key, law_of, parse_cc, preset_of
from .systems import AVAILABLE, HERE, STATE_DIR, LocalSystem, RemoteSystem, System

# CcManager and CcSet, and the names callers outside tcp_modules (the runner, `ccrig clean`, the hosts tests)
# reach through this module; their homes are bpf.py, leftovers.py and systems.py
__all__ = ["CcManager", "CcSet", "PREFERS", "BUILD", "NAME_RE", "STATE_DIR", "RemoteSystem", "cleanup",
           "generated_name", "prefix_tag", "struct_ops_maps"]

PREFERS = ("auto", "kmod", "bpf")


def build(commands: Commands, what: str, folder: Path = HERE) -> bool:
    """Runs tcp_modules/Makefile's `what` in folder (bpf: the laws' BPF templates, or one object's path;
    modules: this machine's kernel modules) and says whether it built. BPF objects only when make finds them
    missing or older than their sources (`make -q` writes nothing and takes no lock: a vm guest's read-only
    checkout, built before the guest started, passes), so a checkout that moved on runs its own glue; modules
    are Kbuild's to judge, which -q cannot ask."""
    argv = ["make", "-C", str(folder), what]
    if what == "modules":
        argv.append(f"KDIR={LocalSystem().kdir()}")
    elif commands.run(["make", "-q", *argv[1:]], check=False).returncode == 0:
        return False
    # two runs started at once (two studies, two test workers) would each write make's shared .tmp files
    with cache_lock(".make.lock", folder / "build"):
        commands.run(argv, timeout=600)
    return True


class CcManager:
    def __init__(self, commands: Commands, prefix: str, prefer: str = "auto", kmod_dir: Path | None = None,
                 system: System | None = None):
        if prefer not in PREFERS:
            raise InputError(f"prefer: got {prefer!r}; expected one of {', '.join(PREFERS)}")
        self.commands = commands          # this machine's: builds the BPF objects (or, here, the modules)
        self.system = system or LocalSystem(Local(commands))
        self.prefix = prefix
        self.prefer = prefer
        # where the .ko are (Kbuild's output, tcp_modules/kmod; on a host the tcp_modules role's); another
        # folder for a read-only tree
        self.kmod_dir = Path(kmod_dir) if kmod_dir else self.system.kmod_dir
        self.modules = Modules(self.system, self.kmod_dir, prefix, self._ensure_built)
        self.loaded: dict[str, Loaded] = {}

    # planning -------------------------------------------------------------------------------------------
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
        kmod_why = self.modules.why_not() if self.prefer in ("auto", "kmod") else ["bpf preferred"]
        bpf_why = bpf.why_not(s) if self.prefer in ("auto", "bpf") else ["kmod preferred"]
        custom_used: dict[str, str] = {}
        have = set(s.available())
        plan = []
        for key, cc, _ in items.values():
            law = law_of(cc)
            if law is None:
                if key not in have and not self.modules.offers_builtin(key):
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
                    self.loaded[key] = self.modules.load(key, law_of(cc))
                else:
                    self.loaded[key] = bpf.register(self.system, self.prefix, key, law_of(cc), self._ensure_built)
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
            extra["module"] = self.modules.modprobe(name)
        return Loaded(name, "builtin", name, extra=extra)

    def _ensure_built(self, what: str) -> None:
        """Builds tcp_modules' BPF objects or (for this machine) its modules, here (build())."""
        build(self.commands, what)

    # teardown -----------------------------------------------------------------------------------------------
    def release(self) -> list[str]:
        """Removes everything this manager loaded; returns what it could not remove (empty: all gone)."""
        s, left = self.system, []
        for item in list(self.loaded.values()):
            if item.form == "bpf" and not bpf.unregister(s, item):
                left.append(f"BPF congestion control {item.kernel_name}" + ("" if s.local else f" on {s.where}"))
        left += self.modules.release()
        self.loaded.clear()
        return left

    def repaired(self) -> dict[str, int]:
        """{cc value: garbage thresholds its BPF variant put right since it was registered} (bpf.repaired),
        for the variants whose count can be read."""
        counts = {item.key: bpf.repaired(self.system, item) for item in self.loaded.values() if item.form == "bpf"}
        return {k: n for k, n in counts.items() if n is not None}

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

    def repaired(self) -> dict[str, int]:
        """Each BPF variant's repairs (CcManager.repaired), by cc value, on a host named "HOST:value"."""
        counts = self._each(lambda key, m: {(v if m.system.local else f"{m.system.name}:{v}"): n
                                            for v, n in m.repaired().items()})
        return {k: n for c in counts for k, n in c.items()}

    def describe(self):
        """For env.json: this machine's list, or per host its node, kernel and what was loaded there."""
        if set(self.managers) == {None}:
            return self.managers[None].describe()
        return {m.system.name: {"node": key, "kernel": m.system.release(), "loaded": m.describe()}
                for key, m in self.managers.items()}
