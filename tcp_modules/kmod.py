"""The kernel-module form of a law: its family's module tcp_NAME (tcp_alphabeta, tcp_poly, ...), built against
/lib/modules/$(uname -r)/build and inserted; presets by their own names, one other parameterisation per family
through its tunable instance (ab_param, poly_param, ...: module parameters, which a connection reads when it
starts). Names and parameters are the families' descriptors' (families/).

On this machine the modules are built here when missing (Kbuild's output, tcp_modules/kmod); on a host they are
the ones the `tcp_modules` Ansible role built there (its tcp_modules_dir). Modules holds what one manager
inserted on one system and the parameter values it found, so release() puts the system back as it was.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ccrig.errors import RunError
from . import laws
from .families import FAMILIES
from .loaded import Loaded, record
from .spec import preset_of
from .systems import System

MODULE = {name: fam.module for name, fam in FAMILIES.items()}
PARAM_INSTANCE = {name: fam.tunable for name, fam in FAMILIES.items()}
MODULE_PARAMS = {name: tuple(p.name for p in fam.params) for name, fam in FAMILIES.items()}


def rmmod(s: System, module: str, tries: int = 20) -> bool:
    # sockets that used the module hold a reference until they are destroyed: give them a moment
    for _ in range(tries):
        if not s.module_loaded(module) or s.ok(["rmmod", module]):
            return True
        time.sleep(0.25)
    return False


def _param_text(v) -> str:
    return str(int(v)) if isinstance(v, bool) else (f"{v:.9f}" if isinstance(v, float) else str(v))


def _param_path(module: str, name: str) -> Path:
    return Path("/sys/module") / module / "parameters" / name


class Modules:
    """The modules one manager inserts on one system (the laws' and builtin congestion controls' tcp_NAME) and
    the tunable instances' parameters it changes. build("modules") builds the laws' modules on this machine."""

    def __init__(self, s: System, kmod_dir: Path, prefix: str, build: Callable[[str], None]):
        self.s, self.kmod_dir, self.prefix, self.build = s, kmod_dir, prefix, build
        self.inserted: list[str] = []               # modules inserted, in order
        self.saved_params: dict[str, dict] = {}     # module -> parameter values it found, to restore

    def built(self) -> bool:
        """Every family's module is built, for this kernel (modinfo's vermagic starts with its release)."""
        s = self.s
        for module in MODULE.values():
            ko = self.kmod_dir / f"{module}.ko"
            if not s.exists(ko):
                return False
            out = s.run(["modinfo", "-F", "vermagic", str(ko)], check=False).stdout
            if not out.startswith(s.release() + " "):
                return False
        return True

    def why_not(self) -> list[str]:
        """Why kernel modules cannot be used here (empty: they can)."""
        s, why = self.s, []
        if not s.modules_supported():
            why.append(f"kernel {s.release()} cannot load modules (no /proc/modules)")
        elif not self.built():
            if not s.local:
                why.append(f"{s.where} has no laws' modules built for kernel {s.release()} in {self.kmod_dir} "
                           f"(`ccrig provision -i INVENTORY` builds them where the kernel's headers are)")
            elif not s.exists(s.kdir() / "Makefile"):
                why.append(f"no kernel headers for {s.release()} at {s.kdir()} "
                           f"(Debian: apt-get install linux-headers-{s.release()})")
        if not s.is_root():
            why.append("inserting a module needs root")
        return why

    def offers_builtin(self, name: str) -> bool:
        """The kernel can load congestion control name as module tcp_NAME."""
        return self.s.modules_supported() and self.s.ok(["modinfo", "-n", f"tcp_{name}"])

    def modprobe(self, name: str) -> str:
        """Loads builtin congestion control name's module; returns the module's name."""
        self.s.run(["modprobe", f"tcp_{name}"])
        self.inserted.append(f"tcp_{name}")
        return f"tcp_{name}"

    def load(self, key: str, law: laws.Law) -> Loaded:
        """Inserts law's module if needed; a preset is served under its own name, another parameterisation by
        the module's tunable instance with law's parameters."""
        s, module = self.s, MODULE[law.law]
        ko = self.kmod_dir / f"{module}.ko"
        if not s.module_loaded(module):
            if not self.built():
                if not s.local:
                    raise RunError(f"{s.where}: module {ko} is not built (run `ccrig provision -i INVENTORY`)")
                self.build("modules")
            s.run(["insmod", str(ko)])
            self.inserted.append(module)
            record(s, f"kmod-{module}", {"module": module, "prefix": self.prefix})
        name = preset_of(law)
        if name is None:
            name = PARAM_INSTANCE[law.law]
            self._set_params(module, law)
        digest = s.sha256(ko)
        return Loaded(key, "kmod", name, law, ko if digest else None, digest, extra={"module": module})

    def _set_params(self, module: str, law: laws.Law) -> None:
        p = law.params()
        if module not in self.saved_params:
            self.saved_params[module] = {n: (self.s.read(_param_path(module, n)) or "").strip()
                                         for n in MODULE_PARAMS[law.law]}
        for n in MODULE_PARAMS[law.law]:
            # a flag a law leaves out of its parameters (halve_first unless set) is off
            self.s.run(["tee", str(_param_path(module, n))], input=_param_text(p.get(n, False)) + "\n")

    def release(self) -> list[str]:
        """Puts back the parameters of modules it did not insert, removes those it did; returns what could not
        be removed."""
        s, left = self.s, []
        for module, values in self.saved_params.items():
            if module in self.inserted or not s.module_loaded(module):
                continue
            for n, v in values.items():
                try:
                    s.run(["tee", str(_param_path(module, n))], check=False, input=v + "\n")
                except RunError:
                    pass
        for module in reversed(self.inserted):
            if rmmod(s, module):
                s.remove(s.state_dir / f"kmod-{module}.json")
            else:
                left.append(f"module {module} (still in use)" + ("" if s.local else f" on {s.where}"))
        self.inserted.clear()
        self.saved_params.clear()
        return left
