"""The `vm` testbed's machine: a distribution kernel booted under virtme-ng, with the repository visible inside.

The `vm` testbed is the `netns` testbed run inside a guest whose kernel has what the running one lacks (netem,
fq, red, sfq, drr, ... as modules) or that pins the kernel for reproducibility. virtme-ng (`vng`) boots the
kernel image with the host's root filesystem shared read-only (9p), so the guest runs the very same
repository and virtual environment; the directories where results go are shared read-write.

    find_kernel(name)       the image: newest /boot/vmlinuz-* with its modules, or one named by path/release
    accel_mode()            "kvm" or "tcg": a short probe, cached (this machine's nested KVM fails, so never hang)
    vng_argv(...)           the vng command line (memory, cpus, root, cwd, read-write dirs, the command)
    run_in_guest(argv, ...) boots, runs argv inside, streams its output, returns its exit status

A boot costs 20-30 s under TCG; callers batch their work into as few boots as they can.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ccrig import machine
from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.needs import Need
from ...testbed import Testbed
# the names callers use, from the modules that hold them
from . import prebuild
from .guest import (ACCELS, CPUS, E1000E_QEMU_OPTS, GUEST_PATH, MEMORY, PROBE_TIMEOUT, VENV_BIN, _print_line,
                    accel_mode, guest_command, guest_name, kvm_firmware_probe, probe_accel, run_in_guest,
                    stop_stray_guests, stray_guests, vng, vng_argv, guest_env)
from .kernel import (BOOT, MODULES, REPO, Kernel, find_kernel, image_release, in_guest,
                     installed_kernels)

__all__ = ["ACCELS", "BOOT", "CPUS", "E1000E_QEMU_OPTS", "GUEST_PATH", "MEMORY", "MODULES", "PROBE_TIMEOUT", "REPO",
           "VENV_BIN", "GuestRun", "Kernel", "TESTBED", "VmOptions", "VmTestbed", "accel_mode", "find_kernel",
           "guest_command", "guest_env", "guest_name", "image_release", "in_guest", "installed_kernels",
           "kvm_firmware_probe", "preflight", "probe_accel", "record_vm", "run_experiment", "run_in_guest",
           "run_ccrig", "stop_stray_guests", "stray_guests", "vng", "vng_argv"]

class VmOptions(BaseModel):
    """The spec's `vm:` section (used when `testbed: vm`, or `auto` picks the vm)."""
    model_config = ConfigDict(extra="forbid")
    kernel: Optional[str] = None   # a release (6.1.0-56-amd64) or an image path; None: the newest installed
    memory: str = MEMORY           # qemu -m: 2G, 1536M
    cpus: int = Field(CPUS, ge=1, le=64)

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str) -> str:
        if not re.fullmatch(r"[1-9][0-9]*[MG]", v):
            raise ValueError(f"got {v!r}; expected a size such as 2G or 1536M")
        return v


# --- the `vm` testbed: a whole `ccrig run` inside the guest -------------------------------------------------

def preflight(options: VmOptions | None = None) -> list:
    """What the host needs to run the vm testbed (experiments.preflight.Need, one per feature)."""
    options = options or VmOptions()
    out = [Need("root privileges", "the vm testbed (the guest runs as root on the host's files)",
                os.geteuid() == 0, "run as root, e.g. `sudo ccrig run SPEC`")]
    for tool, pkg in (("qemu-system-x86_64", "the Debian package qemu-system-x86"),
                      ("busybox", "the Debian package busybox-static")):
        out.append(Need(f"the `{tool}` command", "the vm testbed", shutil.which(tool) is not None,
                        f"install {pkg} (`make deps`)"))
    out.append(Need("virtme-ng (`vng`)", "the vm testbed", (VENV_BIN / "vng").is_file() or bool(shutil.which("vng")),
                    "install the PyPI package virtme-ng into ccrig's environment (`make deps`)"))
    try:
        kernel = find_kernel(options.kernel)
        out.append(Need(f"the guest kernel {kernel.release}", "the vm testbed", True))
    except InputError as e:
        out.append(Need(f"the guest kernel {options.kernel or '(newest installed)'}", "the vm testbed", False,
                        f"{e} (`make deps` installs the distribution's linux-image-amd64)"))
    return out


def _ccrig() -> str:
    """The environment's `ccrig` script: the guest runs the very same installation."""
    path = VENV_BIN / "ccrig"
    return str(path) if path.is_file() else shutil.which("ccrig") or "ccrig"


@dataclass
class GuestRun:
    status: int                # the guest ccrig's exit status
    run_dir: Path | None       # the run directory it wrote (under out_root), if it got that far
    kernel: Kernel
    accel: str


def run_ccrig(args: list[str], out_root: Path, options: VmOptions | None = None, timeout: float = 3600,
              commands: Commands | None = None, output: Callable[[str], None] = _print_line,
              name: str | None = None) -> tuple[int, Kernel, str]:
    """Runs `ccrig ARGS` inside the guest with out_root shared read-write (so what it writes lands where the host
    reads it); returns the guest ccrig's exit status, the kernel and the virtualisation mode."""
    options = options or VmOptions()
    commands = commands or Commands(None)
    kernel = find_kernel(options.kernel)
    mode = accel_mode(kernel, commands)
    out_root = Path(out_root).resolve()
    out_root.mkdir(parents=True, exist_ok=True)
    prebuild.for_guest(kernel, commands)   # the checkout is read-only in the guest
    # the guest is one pair's machine: its pairs run one at a time (its vCPUs are this machine's cores, and a
    # calibration for --jobs auto, the default, would measure the emulator and find its cache read-only)
    if args[:1] == ["run"] or args[:2] == ["study", "run"]:
        args = [*args, "--jobs", "1"]
    status = run_in_guest([_ccrig(), *args], kernel=kernel, accel=mode, timeout=timeout, rwdirs=(out_root,),
                          output=output, commands=commands, memory=options.memory, cpus=options.cpus, name=name)
    return status, kernel, mode


def run_experiment(spec: Path, overrides: list[str], out_root: Path, options: VmOptions | None = None,
                   timeout: float = 3600, commands: Commands | None = None,
                   output: Callable[[str], None] = _print_line, name: str | None = None) -> GuestRun:
    """Runs `ccrig run SPEC` on the netns testbed inside the guest, writing its run directory into out_root,
    and records the vm in its env.json. The guest has no Prometheus: its runner keeps the samples in the archive
    (samples.jsonl) for experiments.backfill."""
    options = options or VmOptions()
    out_root = Path(out_root).resolve()
    out_root.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in out_root.iterdir()}
    args = ["run", str(Path(spec).resolve())]
    for item in overrides:
        args += ["--set", item]
    args += ["--set", "testbed=netns", "--out", str(out_root), "--prometheus", "off", "--no-progress"]
    status, kernel, mode = run_ccrig(args, out_root, options, timeout, commands, output, name)
    new = sorted((p for p in out_root.iterdir() if p.name not in before and p.is_dir()),
                 key=lambda p: p.stat().st_mtime)
    run_dir = new[-1] if new else None
    if run_dir is not None:
        record_vm(run_dir, kernel, mode, options, [_ccrig(), *args])
    return GuestRun(status, run_dir, kernel, mode)


def record_vm(run_dir: Path, kernel: Kernel, mode: str, options: VmOptions, argv: list[str]) -> None:
    """env.json and summary.json of a run made in the guest: the testbed is `vm`; env.json's `kernel` is already
    the guest's (the guest wrote it), `vm` adds the image, its config hash, the virtualisation mode and the
    command, and `host` the machine the guest ran on."""
    env_path = run_dir / "env.json"
    env = json.loads(env_path.read_text()) if env_path.is_file() else {}
    env["testbed"] = "vm"
    env["vm"] = {**guest_env(kernel, mode, options.memory, options.cpus), "inner_testbed": "netns",
                 "guest_argv": argv}
    env["host"] = machine.host(Commands(None))
    env_path.write_text(json.dumps(env, indent=2) + "\n")
    summary_path = run_dir / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        summary["testbed"] = "vm"
        summary_path.write_text(json.dumps(summary, indent=2) + "\n")


class VmTestbed(Testbed):
    """`testbed: vm`: the whole run goes to a guest kernel, where the netns testbed realises the topology. The
    command line hands the spec to run_experiment(); this class declares what the vm testbed needs and cleans, and
    is never set up in this process (elsewhere)."""
    kind = "vm"
    options = VmOptions
    elsewhere = True
    inner = "netns"
    gso = True   # the guest's netns testbed builds it

    @classmethod
    def needs(cls, experiment) -> list[Need]:
        return preflight(getattr(experiment, "vm", None))

    @classmethod
    def clean(cls, commands: Commands, prefix: str, keep) -> list[str]:
        return stop_stray_guests(prefix, keep=keep)

    @classmethod
    def run_spec(cls, spec: Path, overrides: list[str], experiment, out_root: Path, name: str) -> GuestRun:
        """Runs the spec in the guest; the GuestRun has a run directory, or this raises RunError."""
        # pause_gain runs every point twice (with PAUSE and without)
        n_runs = (math.prod(len(v) for v in experiment.sweep.values()) * experiment.repetitions
                  * (2 if experiment.pause_gain else 1))
        # an emulated CPU is slow: boot, set-up and teardown take far longer than the traffic itself (as
        # experiments.run.study's guests, which are bounded alike)
        timeout = 600 + 4 * n_runs * (experiment.duration + 45)
        r = run_experiment(spec, overrides, out_root, experiment.vm, timeout=timeout, name=name)
        if r.run_dir is None:
            raise RunError(f"the run in the vm ({r.kernel.release}, {r.accel}) wrote no run directory; "
                           f"its output is above (exit status {r.status})")
        return r

    @classmethod
    def run_specs_elsewhere(cls, args: list[str], out_root: Path, options: VmOptions | None, timeout: float,
                            name: str) -> tuple[int | str, Callable[[Path], None]]:
        """`ccrig ARGS` in one guest (a study's specs together: one boot, not one per spec, as a TCG boot costs
        20-30 s); each run directory it wrote is then marked with the guest's kernel and mode (record_vm). The
        guest's output also goes to out_root/guest.log, so a guest stopped at its bound leaves what it said."""
        options = options or VmOptions()
        with open(Path(out_root) / "guest.log", "a") as log:
            def output(line: str) -> None:
                _print_line(line)
                log.write(line)
                log.flush()
            try:
                status, kernel, mode = run_ccrig(args, out_root, options, timeout=timeout, name=name, output=output)
            except RunError as e:   # stopped at its bound (or its boot failed): its unfinished specs fail with this
                kernel = find_kernel(options.kernel)   # what run_ccrig found, for marking what the guest finished
                status, mode = f"{e} (its output: {Path(out_root) / 'guest.log'})", accel_mode(kernel, Commands(None))

        def mark(run_dir: Path) -> None:
            record_vm(run_dir, kernel, mode, options, [_ccrig(), *args])
        return status, mark

    def up(self) -> None:
        raise RunError("the vm testbed runs in a guest kernel (run_experiment), not in this process")

    run = popen = up

    def down(self) -> None:
        pass


TESTBED = VmTestbed
