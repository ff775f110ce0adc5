"""What a guest would build on first use, built here before it boots.

The guest sees this machine's files read-only outside the folders it is given (the run's output), so a build it
starts in the checkout fails: in a fresh clone in the home directory, `ccrig study run polynomial --quick` ended
in "make -C .../tcp_modules modules ... (in the vm, exit status 1)". Each artefact here is one the guest then
finds built and uses as it is:

- the laws' kernel modules, against the guest kernel's headers (the distribution's linux-headers package, which
  `make deps` installs beside the image), into tcp_modules/kmod;
- the loss program (topologies/loss/), the same object for any kernel;
- the queue monitor (qdiscs/sojourn/), CO-RE, so the build of this machine's BTF serves the guest's kernel too;
- the laws' BPF templates (tcp_modules/build), CO-RE as well, for a guest that runs a law as BPF.

Each is built only when missing or stale, so a second guest costs nothing here; two guests starting at once (two
studies, or the test suite's vm tests side by side) build one after the other, under a lock, never in one tree at
the same time.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ccrig.commands import Commands
from ccrig.machine import cache_lock
from ccrig.tcp_modules.kmod import MODULE
from ccrig.tcp_modules.manager import build as build_laws
from ccrig.tcp_modules.systems import HERE as TCP_MODULES, KMOD_DIR
from ...loss import program as loss_program
from .kernel import Kernel


def modules_built_for(release: str, commands: Commands, kmod_dir: Path = KMOD_DIR) -> bool:
    """Both laws' modules are built, for this kernel release (modinfo's vermagic starts with it)."""
    for module in MODULE.values():
        ko = kmod_dir / f"{module}.ko"
        if not ko.is_file():
            return False
        vermagic = commands.run(["modinfo", "-F", "vermagic", str(ko)], check=False).stdout
        if not vermagic.startswith(release + " "):
            return False
    return True


def for_guest(kernel: Kernel, commands: Commands) -> list[str]:
    """Builds what the guest running kernel would otherwise build itself; returns what was built. What this
    machine cannot build (no headers for that kernel, no clang) is left to the guest, whose own preflight then
    names what is missing."""
    with cache_lock("prebuild.lock"):
        return _build(kernel, commands)


def _build(kernel: Kernel, commands: Commands) -> list[str]:
    # every testbed is imported with every `ccrig` command (kinds.available), one refused at once too
    from ccrig.qdiscs import sojourn  # lazy: numpy
    built = []
    kdir = Path("/lib/modules") / kernel.release / "build"
    if (kdir / "Makefile").exists() and not modules_built_for(kernel.release, commands):
        commands.run(["make", "-C", str(TCP_MODULES), "modules", f"KDIR={kdir}"], timeout=600)
        built.append(f"kernel modules for {kernel.release}")
    fresh = loss_program.OBJECT.exists() and loss_program.OBJECT.stat().st_mtime >= loss_program.SOURCE.stat().st_mtime
    if not fresh and not loss_program.why_not():
        loss_program.build(commands)
        built.append("loss program")
    obj, exe = sojourn.built()
    if not (obj.exists() and exe.exists()) and not sojourn.why_not():
        sojourn.build(commands)
        built.append("queue monitor")
    if all(shutil.which(t) for t in ("clang", "llvm-strip", "bpftool")) and build_laws(commands, "bpf"):
        built.append("the laws' BPF templates")
    return built
