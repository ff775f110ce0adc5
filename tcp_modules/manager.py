"""Loads the congestion controls an experiment's flows ask for, and removes them afterwards.

Each cc value (see spec.py) takes one of three forms:
- builtin: a name the kernel offers (tcp_available_congestion_control), or a kernel module tcp_NAME it can load;
- kmod: the tcp_alphabeta / tcp_poly modules, built against /lib/modules/$(uname -r)/build and inserted;
  presets by their own names, one other parameterisation per law through ab_param / poly_param (module
  parameters, which a connection reads when it starts);
- bpf: a variant of build/tcp_{alphabeta,poly}.bpf.o registered with `bpftool struct_ops register`, any
  number of parameterisations, each under a generated name `cr{a|p}_{PPPP}_{HHHHHH}`: a for alphabeta, p for
  poly, PPPP four hex digits of the manager's prefix, HHHHHH six of the parameters — recognisable by
  `cleanup()`, at most 15 characters (TCP_CA_NAME_MAX).

`prefer` auto takes kmod where the kernel loads modules and has headers, BPF otherwise. What is loaded is
recorded in STATE_DIR (a tmpfs, like the registrations themselves), so `ccrig cc list` and `cleanup()` know
it even after the process that loaded it is gone.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from experiments.commands import Commands
from experiments.errors import InputError, RunError
from . import bpfobj, laws
from .spec import Cc, cc_key, law_of, parse_cc, preset_of

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
KMOD_DIR = HERE / "kmod"
STATE_DIR = Path(os.environ.get("CCRIG_CC_STATE", "/run/ccrig/cc"))
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
BTF = Path("/sys/kernel/btf/vmlinux")
MODULE = {"alphabeta": "tcp_alphabeta", "poly": "tcp_poly"}
PARAM_INSTANCE = {"alphabeta": "ab_param", "poly": "poly_param"}
MODULE_PARAMS = {"alphabeta": ("alpha", "beta"), "poly": ("alpha", "beta", "k", "l", "terms", "per_ack")}
NAME_RE = re.compile(r"^cr([ap])_([0-9a-f]{4})_([0-9a-f]{6})$")
PREFERS = ("auto", "kmod", "bpf")


def available() -> list[str]:
    """The congestion controls the kernel offers now."""
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


def prefix_tag(prefix: str) -> str:
    return hashlib.sha1(prefix.encode()).hexdigest()[:4]


def generated_name(prefix: str, law: laws.Law) -> str:
    """cr{a|p}_{prefix tag}_{parameter tag}: the same parameters under one prefix get the same name."""
    params = json.dumps(law.params(), sort_keys=True)
    return f"cr{law.law[0]}_{prefix_tag(prefix)}_{hashlib.sha1(params.encode()).hexdigest()[:6]}"


def kernel_release() -> str:
    return platform.release()


def modules_supported() -> bool:
    return Path("/proc/modules").exists()


def kdir() -> Path:
    return Path("/lib/modules") / kernel_release() / "build"


def module_loaded(module: str) -> bool:
    return (Path("/sys/module") / module / "initstate").exists()


def _is_root() -> bool:
    return os.geteuid() == 0


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

def struct_ops_maps(commands: Commands) -> list[tuple[int, str]]:
    """(map id, congestion-control name) of every registered BPF congestion control."""
    proc = commands.run(["bpftool", "-j", "struct_ops", "dump"], check=False)
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


def _unregister_id(commands: Commands, map_id: int) -> bool:
    return commands.ok(["bpftool", "struct_ops", "unregister", "id", str(map_id)])


def _rmmod(commands: Commands, module: str, tries: int = 20) -> bool:
    # sockets that used the module hold a reference until they are destroyed: give them a moment
    for _ in range(tries):
        if not module_loaded(module) or commands.ok(["rmmod", module]):
            return True
        time.sleep(0.25)
    return False


# --- the manager -------------------------------------------------------------------------------------------

class CcManager:
    def __init__(self, commands: Commands, prefix: str, prefer: str = "auto", kmod_dir: Path | None = None):
        if prefer not in PREFERS:
            raise InputError(f"prefer: got {prefer!r}; expected one of {', '.join(PREFERS)}")
        self.commands = commands
        self.prefix = prefix
        self.prefer = prefer
        # where the .ko are (Kbuild's output, tcp_modules/kmod); another folder for a read-only tree
        self.kmod_dir = Path(kmod_dir) if kmod_dir else KMOD_DIR
        self.loaded: dict[str, Loaded] = {}
        self._inserted: list[str] = []               # modules this manager inserted
        self._saved_params: dict[str, dict] = {}     # module -> parameter values it found, to restore

    # planning -------------------------------------------------------------------------------------------
    def _kmod_possible(self) -> list[str]:
        """Why kernel modules cannot be used here (empty: they can)."""
        why = []
        if not modules_supported():
            why.append(f"kernel {kernel_release()} cannot load modules (no /proc/modules)")
        elif not self._kmod_built() and not (kdir() / "Makefile").exists():
            why.append(f"no kernel headers for {kernel_release()} at {kdir()} "
                       f"(Debian: apt-get install linux-headers-{kernel_release()})")
        if not _is_root():
            why.append("inserting a module needs root")
        return why

    def _kmod_built(self) -> bool:
        """Both modules are built, for this kernel (modinfo's vermagic starts with its release)."""
        for module in MODULE.values():
            ko = self.kmod_dir / f"{module}.ko"
            if not ko.exists():
                return False
            out = self.commands.run(["modinfo", "-F", "vermagic", str(ko)], check=False).stdout
            if not out.startswith(kernel_release() + " "):
                return False
        return True

    def _bpf_possible(self) -> list[str]:
        why = []
        if not BTF.exists():
            why.append(f"kernel {kernel_release()} has no BTF ({BTF} missing; needs CONFIG_DEBUG_INFO_BTF=y)")
        if shutil.which("bpftool") is None:
            why.append("bpftool is not installed (Debian: apt-get install bpftool, or `make deps`)")
        if not all((BUILD / o).exists() for o in bpfobj.OBJECT.values()):
            missing = [t for t in ("clang", "llvm-strip") if shutil.which(t) is None]
            if missing:
                why.append(f"the BPF objects are not built and {', '.join(missing)} is missing "
                           f"(Debian: apt-get install clang llvm, or `make deps`)")
        if not _is_root():
            why.append("registering a BPF congestion control needs root")
        return why

    def _plan(self, ccs) -> tuple[list[tuple[str, Cc, str]], list[str]]:
        """[(key, cc, form)] for the distinct cc values, and the problems found."""
        problems: list[str] = []
        items: dict[str, tuple[str, Cc, str]] = {}
        for raw in ccs:
            cc = parse_cc(raw)
            items.setdefault(cc_key(cc), (cc_key(cc), cc, ""))
        kmod_why = self._kmod_possible() if self.prefer in ("auto", "kmod") else ["bpf preferred"]
        bpf_why = self._bpf_possible() if self.prefer in ("auto", "bpf") else ["kmod preferred"]
        custom_used: dict[str, str] = {}
        have = set(available())
        plan = []
        for key, cc, _ in items.values():
            law = law_of(cc)
            if law is None:
                if key not in have and not self._module_for_builtin(key):
                    problems.append(
                        f"cc {key!r}: kernel {kernel_release()} does not offer it (available: {' '.join(sorted(have))})"
                        + ("" if modules_supported() else " and cannot load modules")
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
                        f"cc {key!r} cannot be loaded on kernel {kernel_release()}: {'; '.join(why)}; "
                        f"way out: the vm testbed (a distribution kernel with modules and headers)"
                        + (", or prefer: auto" if self.prefer != "auto" else ""))
                form = "none"
            plan.append((key, cc, form))
        return plan, problems

    def _module_for_builtin(self, name: str) -> bool:
        return modules_supported() and self.commands.ok(["modinfo", "-n", f"tcp_{name}"])

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
            have = set(available())
            for item in self.loaded.values():
                if item.kernel_name not in have:
                    raise RunError(f"cc {item.key!r}: loaded as {item.form} {item.kernel_name!r}, but the kernel "
                                   f"does not list it in {AVAILABLE}")
        except Exception:
            self.release()
            raise
        return {key: item.kernel_name for key, item in self.loaded.items()}

    def _builtin(self, name: str) -> Loaded:
        extra = {}
        if name not in available():
            self.commands.run(["modprobe", f"tcp_{name}"])
            self._inserted.append(f"tcp_{name}")
            extra["module"] = f"tcp_{name}"
        return Loaded(name, "builtin", name, extra=extra)

    def _ensure_built(self, what: str) -> None:
        argv = ["make", "-C", str(HERE), what]
        if what == "modules":
            argv.append(f"KDIR={kdir()}")
        self.commands.run(argv, timeout=600)

    def _kmod(self, key: str, law: laws.Law) -> Loaded:
        module = MODULE[law.law]
        ko = self.kmod_dir / f"{module}.ko"
        if not module_loaded(module):
            if not self._kmod_built():
                self._ensure_built("modules")
            self.commands.run(["insmod", str(ko)])
            self._inserted.append(module)
            self._record(f"kmod-{module}", {"module": module, "prefix": self.prefix})
        preset = preset_of(law)
        if preset is not None:
            name = preset
        else:
            name = PARAM_INSTANCE[law.law]
            self._set_module_params(module, law)
        obj = ko if ko.exists() else None
        return Loaded(key, "kmod", name, law, obj, bpfobj.sha256(ko.read_bytes()) if obj else None,
                      extra={"module": module})

    def _set_module_params(self, module: str, law: laws.Law) -> None:
        pdir = Path("/sys/module") / module / "parameters"
        p = law.params()
        if module not in self._saved_params:
            self._saved_params[module] = {n: (pdir / n).read_text().strip() for n in MODULE_PARAMS[law.law]}
        for n in MODULE_PARAMS[law.law]:
            v = p[n]
            text = str(int(v)) if isinstance(v, bool) else (f"{v:.9f}" if isinstance(v, float) else str(v))
            self.commands.run(["tee", str(pdir / n)], input=text + "\n")

    def _bpf(self, key: str, law: laws.Law) -> Loaded:
        template = BUILD / bpfobj.OBJECT[law.law]
        if not template.exists():
            self._ensure_built("bpf")
        name = generated_name(self.prefix, law)
        data = bpfobj.variant(template, law, name)
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        obj = STATE_DIR / f"{name}.bpf.o"
        obj.write_bytes(data)
        if name in available():
            # ours (same prefix, same parameters) left by a run that died: replace it
            for map_id, cc_name in struct_ops_maps(self.commands):
                if cc_name == name:
                    _unregister_id(self.commands, map_id)
        proc = self.commands.run(["bpftool", "struct_ops", "register", str(obj)])
        m = re.search(r"\bid (\d+)", proc.stdout + proc.stderr)
        map_id = int(m.group(1)) if m else next((i for i, n in struct_ops_maps(self.commands) if n == name), None)
        item = Loaded(key, "bpf", name, law, obj, bpfobj.sha256(data), map_id,
                      extra={"template": str(template), "template_sha256": bpfobj.sha256(template.read_bytes())})
        self._record(name, {**item.describe(), "prefix": self.prefix, "bpf_id": map_id})
        return item

    def _record(self, stem: str, data: dict) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        (STATE_DIR / f"{stem}.json").write_text(json.dumps(data, indent=1))

    # teardown -----------------------------------------------------------------------------------------------
    def release(self) -> list[str]:
        """Removes everything this manager loaded; returns what it could not remove (empty: all gone)."""
        left = []
        for item in list(self.loaded.values()):
            if item.form == "bpf":
                ok = item.bpf_id is not None and _unregister_id(self.commands, item.bpf_id)
                if not ok:
                    ok = all(_unregister_id(self.commands, i) for i, n in struct_ops_maps(self.commands)
                             if n == item.kernel_name)
                if item.kernel_name in available():
                    left.append(f"BPF congestion control {item.kernel_name}")
                for p in (STATE_DIR / f"{item.kernel_name}.bpf.o", STATE_DIR / f"{item.kernel_name}.json"):
                    p.unlink(missing_ok=True)
        for module, values in self._saved_params.items():
            if module in self._inserted or not module_loaded(module):
                continue
            for n, v in values.items():
                try:
                    self.commands.run(["tee", str(Path("/sys/module") / module / "parameters" / n)],
                                      check=False, input=v + "\n")
                except RunError:
                    pass
        for module in reversed(self._inserted):
            if _rmmod(self.commands, module):
                (STATE_DIR / f"kmod-{module}.json").unlink(missing_ok=True)
            else:
                left.append(f"module {module} (still in use)")
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


# --- `ccrig clean` ---------------------------------------------------------------------------------------------

def _recorded_prefixes() -> dict[str, str]:
    """{generated name: prefix of the manager that loaded it}, from STATE_DIR's records."""
    out = {}
    for rec in STATE_DIR.glob("cr*.json") if STATE_DIR.exists() else []:
        try:
            out[rec.name.split(".")[0]] = json.loads(rec.read_text()).get("prefix", "")
        except (OSError, ValueError):
            pass
    return out


def cleanup(commands: Commands, prefix: str | None = None, keep=None) -> list[str]:
    """Removes every BPF variant ccrig registered (only those of `prefix` if given), and the modules ccrig
    inserted (with a prefix: those that prefix's run inserted). keep(prefix) -> True spares what a manager
    with that prefix loaded (a run still going). Returns one sentence per thing removed."""
    said = []
    tag = prefix_tag(prefix) if prefix is not None else None
    owners = _recorded_prefixes()
    if shutil.which("bpftool") is not None:
        for map_id, name in struct_ops_maps(commands):
            m = NAME_RE.match(name)
            if m and keep is not None and keep(owners.get(name, "")):
                said.append(f"kept BPF congestion control {name}"
                            + (f": {owners[name]} still uses it" if owners.get(name) else ""))
                continue
            if m and (tag is None or m.group(2) == tag):
                if _unregister_id(commands, map_id):
                    said.append(f"unregistered BPF congestion control {name}")
                else:
                    said.append(f"could not unregister BPF congestion control {name} (map id {map_id})")
    if STATE_DIR.exists():
        still = set(available())
        for f in STATE_DIR.glob("cr*_*"):
            name = f.name.split(".")[0]
            m = NAME_RE.match(name)
            if m and name not in still and (tag is None or m.group(2) == tag):
                f.unlink(missing_ok=True)
        for rec in STATE_DIR.glob("kmod-*.json"):
            try:
                info = json.loads(rec.read_text())
            except (OSError, ValueError):
                info = {}
            if prefix is not None and info.get("prefix") != prefix:
                continue
            if keep is not None and keep(info.get("prefix", "")):
                continue
            module = info.get("module", rec.stem.removeprefix("kmod-"))
            if _rmmod(commands, module, tries=4):
                said.append(f"removed module {module}")
                rec.unlink(missing_ok=True)
            else:
                said.append(f"could not remove module {module} (still in use)")
    if prefix is None and keep is None and modules_supported():
        for module in MODULE.values():
            if module_loaded(module):
                if _rmmod(commands, module, tries=4):
                    said.append(f"removed module {module}")
                else:
                    said.append(f"could not remove module {module} (still in use)")
    return said
