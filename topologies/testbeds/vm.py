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

import hashlib
import json
import math
import os
import platform
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig import machine
from ccrig.needs import Need
from ccrig.procs import stop_group, stop_pids
from ..testbed import Testbed

REPO = Path(__file__).resolve().parents[2]
BOOT = Path("/boot")
MODULES = Path("/lib/modules")
# virtme-ng is a dependency of ccrig (pyproject.toml): its scripts sit next to the interpreter
VENV_BIN = Path(sys.executable).parent
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MEMORY = "2G"
CPUS = 2
ACCELS = ("kvm", "tcg")
# two e1000e NICs joined by a qemu hub and nothing else (no host network): a driver that implements the Ethernet
# PAUSE API (ethtool -A), for the PAUSE tests of the vm tier; traffic stays inside the guest
E1000E_QEMU_OPTS = ("-netdev hubport,id=ccp1,hubid=7 -device e1000e,netdev=ccp1 "
                    "-netdev hubport,id=ccp2,hubid=7 -device e1000e,netdev=ccp2")
PROBE_TIMEOUT = 5.0     # s for qemu's firmware to print its banner under KVM (it takes ~0.1 s when KVM works)
KVM_BOOT_TIMEOUT = 45.0  # s for a KVM boot of the guest running `true` (~3 s when KVM works)


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


@dataclass(frozen=True)
class Kernel:
    """A bootable kernel image and what identifies it."""
    image: Path
    release: str

    @property
    def config(self) -> Path | None:
        path = self.image.parent / f"config-{self.release}"
        return path if path.is_file() else None

    @property
    def modules(self) -> Path:
        return MODULES / self.release

    def config_sha256(self) -> str | None:
        return _sha256(self.config) if self.config else None

    def image_sha256(self) -> str:
        return _sha256(self.image)

    def describe(self) -> dict:
        """What env.json records about the guest kernel."""
        return {"release": self.release, "image": str(self.image), "image_sha256": self.image_sha256(),
                "config": str(self.config) if self.config else None, "config_sha256": self.config_sha256()}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def image_release(image: Path) -> str | None:
    """The release string an x86 bzImage carries in its setup header (Documentation/arch/x86/boot.rst:
    the 2-byte field at 0x20E points, relative to 0x200, at "6.1.0-56-amd64 (debian-kernel@...) #1 ...")."""
    try:
        with open(image, "rb") as f:
            head = f.read(0x10000)
    except OSError:
        return None
    if len(head) < 0x210 or head[0x202:0x206] != b"HdrS":
        return None
    offset = int.from_bytes(head[0x20E:0x210], "little") + 0x200
    text = head[offset:offset + 256].split(b"\0", 1)[0].decode("ascii", "replace")
    return text.split()[0] if text.split() else None


def _version_key(release: str) -> list:
    """6.1.0-56-amd64 < 6.1.0-112-amd64 < 6.10.0-1-amd64: numbers compare as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.\-+~]", release)]


def installed_kernels() -> list[Kernel]:
    """Images under /boot whose modules are installed (the distribution package installs both), oldest first."""
    out = []
    for image in BOOT.glob("vmlinuz-*"):
        release = image.name.removeprefix("vmlinuz-")
        if (MODULES / release).is_dir():
            out.append(Kernel(image, release))
    return sorted(out, key=lambda k: _version_key(k.release))


def find_kernel(name: str | None = None) -> Kernel:
    """The kernel to boot: None -> the newest installed distribution kernel; else a release (6.1.0-56-amd64) or
    the path of an image. Its modules must be under /lib/modules/<release>, where the guest loads them from."""
    if name is None:
        kernels = installed_kernels()
        if not kernels:
            raise InputError("kernel: no /boot/vmlinuz-* with modules under /lib/modules was found; install the "
                             "distribution kernel (`make deps` installs linux-image-amd64) or name an image")
        return kernels[-1]
    path = Path(name)
    if "/" not in name:
        path = BOOT / f"vmlinuz-{name}"
    if not path.is_file():
        have = ", ".join(k.release for k in installed_kernels()) or "none installed"
        raise InputError(f"kernel: got {name!r}; expected a kernel release with an image /boot/vmlinuz-<release> "
                         f"({have}) or the path of a kernel image")
    release = path.name.removeprefix("vmlinuz-") if path.name.startswith("vmlinuz-") else image_release(path)
    if release is None:
        raise InputError(f"kernel: got {name!r}; expected a bootable x86 kernel image (no bzImage header found)")
    kernel = Kernel(path.resolve(), release)
    if not kernel.modules.is_dir():
        raise InputError(f"kernel: got {name!r}; its modules are not installed under {kernel.modules} "
                         f"(install the kernel's package, or `make modules_install` for a kernel you built)")
    return kernel


def in_guest() -> bool:
    """Whether this process runs inside a virtme-ng guest (its init puts virtme_* options on the command line)."""
    try:
        return "virtme_" in Path("/proc/cmdline").read_text()
    except OSError:
        return False


# --- KVM or TCG -------------------------------------------------------------------------------------------

def _cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ccrig" / "vm-accel.json"


def _qemu() -> str:
    path = shutil.which("qemu-system-x86_64")
    if path is None:
        raise InputError("the `qemu-system-x86_64` command is missing; install the Debian package qemu-system-x86 "
                         "(`make deps`)")
    return path


def _accel_key(kernel: Kernel) -> str:
    """What the answer depends on: the host kernel, the qemu binary, the guest kernel."""
    qemu = Path(_qemu())
    st = qemu.stat()
    return f"{platform.release()}|{qemu}|{st.st_size}|{int(st.st_mtime)}|{kernel.image}|{kernel.release}"


def kvm_firmware_probe(commands: Commands | None = None, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether a KVM vCPU with vng's CPU model runs guest code: qemu's firmware (SeaBIOS) prints its banner to
    the debug port within a fraction of a second under working KVM. On this machine qemu aborts at once
    ("failed to set MSR"); a nested KVM that hangs instead runs into the timeout. Either way: no KVM."""
    commands = commands or Commands(None)
    argv = [_qemu(), "-machine", "q35,accel=kvm", "-cpu", "host,topoext=on", "-smp", "2", "-m", "64",
            "-nodefaults", "-display", "none", "-no-reboot", "-serial", "none", "-monitor", "none",
            "-chardev", "stdio,id=dbg", "-device", "isa-debugcon,iobase=0x402,chardev=dbg"]
    proc = commands.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and b"Running on KVM" not in seen:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break  # qemu exited
            seen += chunk
        return b"Running on KVM" in seen
    finally:
        _kill_group(proc)


def probe_accel(kernel: Kernel, commands: Commands | None = None) -> str:
    """kvm only if /dev/kvm is usable, qemu's firmware runs under it, and the guest kernel boots under it within
    a bound; otherwise tcg. Never hangs: every step has a timeout."""
    commands = commands or Commands(None)
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    if not kvm_firmware_probe(commands):
        return "tcg"
    try:
        status = run_in_guest(["true"], kernel=kernel, accel="kvm", timeout=KVM_BOOT_TIMEOUT,
                              output=lambda line: None, commands=commands)
    except RunError:
        return "tcg"
    return "kvm" if status == 0 else "tcg"


def accel_mode(kernel: Kernel | None = None, commands: Commands | None = None, refresh: bool = False) -> str:
    """kvm or tcg for this host and guest kernel, probed once and cached (~/.cache/ccrig/vm-accel.json).
    CCRIG_VM_ACCEL=kvm|tcg forces the choice."""
    forced = os.environ.get("CCRIG_VM_ACCEL")
    if forced:
        if forced not in ACCELS:
            raise InputError(f"CCRIG_VM_ACCEL: got {forced!r}; expected kvm or tcg")
        return forced
    kernel = kernel or find_kernel()
    key = _accel_key(kernel)
    path = _cache_path()
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    if not refresh and cache.get(key) in ACCELS:
        return cache[key]
    mode = probe_accel(kernel, commands)
    cache[key] = mode
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1) + "\n")
        tmp.replace(path)
    except OSError:
        pass  # an unwritable cache only costs a probe next time
    return mode


# --- booting --------------------------------------------------------------------------------------------

def vng() -> str:
    """The vng script of this environment (it runs virtme-run from the same folder, found through PATH)."""
    path = VENV_BIN / "vng"
    if path.is_file():
        return str(path)
    found = shutil.which("vng")
    if found is None:
        raise InputError("the `vng` command (virtme-ng) is missing; `make deps` installs it into the environment")
    return found


def guest_command(argv: list[str], env: dict[str, str] | None = None) -> str:
    """The shell line vng runs in the guest: argv with an environment that finds this repository's tools.
    The guest's root is the host's, read-only; bytecode caches are not written there."""
    base = {"PATH": f"{VENV_BIN}:{GUEST_PATH}", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp",
            "MPLCONFIGDIR": "/tmp/matplotlib", "PYTHONUNBUFFERED": "1"}
    for name in ("CI", "CCRIG_PROMETHEUS_URL"):
        if name in os.environ:
            base[name] = os.environ[name]
    base.update(env or {})
    return shlex.join(["env", *(f"{k}={v}" for k, v in base.items()), *argv])


def guest_name(prefix: str | None = None) -> str:
    """The guest's name (qemu -name, the guest's hostname): the run's prefix, so `ccrig clean` finds it."""
    return prefix or f"ccrig-{os.getpid()}"


def vng_argv(kernel: Kernel, command: str, accel: str, cwd: Path = REPO, rwdirs: tuple[Path, ...] = (),
             memory: str = MEMORY, cpus: int = CPUS, name: str | None = None, qemu_opts: str = "") -> list[str]:
    """The vng command line. The guest runs as root (namespaces, tc, modprobe) with the host's root file system
    read-only and each of rwdirs shared read-write at the same path, so what the guest writes there is where
    the host reads it. 9p is forced: vng would otherwise try qemu's C virtiofsd, fail, and lose ~3 s."""
    if accel not in ACCELS:
        raise InputError(f"accel: got {accel!r}; expected one of {', '.join(ACCELS)}")
    # vng starts virtme-run through PATH: the environment's scripts folder goes first
    path = f"PATH={Path(vng()).parent}:{os.environ.get('PATH', GUEST_PATH)}"
    argv = ["env", path, vng(), "--run", str(kernel.image), "--user", "root", "--memory", memory, "--cpus", str(cpus),
            "--force-9p", "--cwd", str(cwd), "--name", guest_name(name)]
    if accel == "tcg":
        argv.append("--disable-kvm")
    for d in rwdirs:
        d = Path(d).resolve()
        if not d.is_dir():
            raise InputError(f"rwdir: got {str(d)!r}; expected an existing directory to share with the guest")
        argv += ["--rwdir", str(d)]
    if qemu_opts:
        argv.append(f"--qemu-opts={qemu_opts}")  # with "=": the value starts with a dash
    return argv + ["--exec", command]


def _kill_group(proc: subprocess.Popen) -> None:
    """Stops vng, virtme-run and qemu: they share the process group Commands.popen gave them."""
    stop_group(proc, grace=5)
    if proc.stdout is not None:
        proc.stdout.close()


def _print_line(line: str) -> None:
    sys.stdout.write(line)
    sys.stdout.flush()


def run_in_guest(argv: list[str], kernel: Kernel | str | None = None, timeout: float = 900,
                 rwdirs: tuple[Path, ...] = (), env: dict[str, str] | None = None, cwd: Path = REPO,
                 output: Callable[[str], None] = _print_line, commands: Commands | None = None,
                 accel: str | None = None, memory: str = MEMORY, cpus: int = CPUS, name: str | None = None,
                 qemu_opts: str = "") -> int:
    """Boots the kernel, runs argv inside as root in cwd, streams its output (stdout and stderr merged, line by
    line) to `output`, and returns its exit status. A boot or command that outlives `timeout` seconds is
    killed (RunError); so is one interrupted by Ctrl-C (the KeyboardInterrupt goes on)."""
    if not isinstance(kernel, Kernel):
        kernel = find_kernel(kernel)
    commands = commands or Commands(None)
    mode = accel or accel_mode(kernel, commands)
    full = vng_argv(kernel, guest_command(argv, env), mode, cwd, rwdirs, memory, cpus, name, qemu_opts)
    proc = commands.popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    pending = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RunError(f"the guest ({kernel.release}, {mode}) did not finish {shlex.join(argv)!r} "
                               f"within {timeout:g} s; it was stopped")
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                output(line.decode("utf-8", "replace") + "\n")
        if pending:
            output(pending.decode("utf-8", "replace") + "\n")
        return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise RunError(f"the guest ({kernel.release}, {mode}) closed its output but did not exit within "
                       f"{timeout:g} s; it was stopped") from None
    finally:
        _kill_group(proc)


def stray_guests(prefix: str = "ccrig-") -> list[tuple[int, str]]:
    """(pid, name) of the qemu processes of guests whose name starts with prefix: a guest outlives its run only
    when the run was killed outright (SIGKILL), since run_in_guest stops it otherwise."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not args or not os.path.basename(args[0]).startswith(b"qemu-system"):
            continue
        for flag, value in zip(args, args[1:]):
            if flag == b"-name" and value.decode(errors="replace").startswith(prefix):
                out.append((int(proc.name), value.decode(errors="replace")))
    return out


def stop_stray_guests(prefix: str = "ccrig-", keep: Callable[[str], bool] = lambda name: False) -> list[str]:
    """Stops them (SIGTERM, then SIGKILL); `keep(name)` spares a guest whose run is still going."""
    said = []
    for pid, name in stray_guests(prefix):
        if keep(name):
            said.append(f"kept guest {name} (qemu pid {pid}): its run is still going")
            continue
        stop_pids([pid], grace=5)
        said.append(f"stopped guest {name} (qemu pid {pid})")
    return said


def guest_env(kernel: Kernel, mode: str, memory: str = MEMORY, cpus: int = CPUS) -> dict:
    """What env.json records about a run on the `vm` testbed."""
    return {"kernel": kernel.describe(), "virtualisation": mode, "memory": memory, "cpus": cpus,
            "virtme_ng": _vng_version()}


def _vng_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("virtme-ng")
    except Exception:  # not installed as a distribution: the argv still says which vng ran
        return None


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


def run_experiment(spec: Path, overrides: list[str], out_root: Path, options: VmOptions | None = None,
                   timeout: float = 3600, commands: Commands | None = None,
                   output: Callable[[str], None] = _print_line, name: str | None = None) -> GuestRun:
    """Runs `ccrig run SPEC` on the netns testbed inside the guest, writing its run directory into out_root
    (shared read-write, so it lands where the host reads it), and records the vm in its env.json. The guest has
    no Prometheus: its runner keeps the samples in the archive (samples.jsonl) for experiments.backfill."""
    options = options or VmOptions()
    commands = commands or Commands(None)
    kernel = find_kernel(options.kernel)
    mode = accel_mode(kernel, commands)
    out_root = Path(out_root).resolve()
    out_root.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in out_root.iterdir()}
    argv = [_ccrig(), "run", str(Path(spec).resolve())]
    for item in overrides:
        argv += ["--set", item]
    argv += ["--set", "testbed=netns", "--out", str(out_root), "--prometheus", "off", "--no-progress"]
    status = run_in_guest(argv, kernel=kernel, accel=mode, timeout=timeout, rwdirs=(out_root,), output=output,
                          commands=commands, memory=options.memory, cpus=options.cpus, name=name)
    new = sorted((p for p in out_root.iterdir() if p.name not in before and p.is_dir()),
                 key=lambda p: p.stat().st_mtime)
    run_dir = new[-1] if new else None
    if run_dir is not None:
        record_vm(run_dir, kernel, mode, options, argv)
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
        # an emulated CPU is slow: boot, set-up and teardown take far longer than the traffic itself
        timeout = 600 + 3 * n_runs * (experiment.duration + 15)
        r = run_experiment(spec, overrides, out_root, experiment.vm, timeout=timeout, name=name)
        if r.run_dir is None:
            raise RunError(f"the run in the vm ({r.kernel.release}, {r.accel}) wrote no run directory; "
                           f"its output is above (exit status {r.status})")
        return r

    def up(self) -> None:
        raise RunError("the vm testbed runs in a guest kernel (run_experiment), not in this process")

    run = popen = up

    def down(self) -> None:
        pass


TESTBED = VmTestbed
