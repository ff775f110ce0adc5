"""The guest machine: KVM or TCG (a short probe, cached: this machine's nested KVM fails, README's vm testbed says
how), the vng command line, booting it to run a command, and finding or stopping guests a killed run left."""
from __future__ import annotations

import json
import os
import platform
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.machine import GIT_ENV, TOOLS_ENV, cache_dir, git_revision, tool_versions
from ccrig.procs import stop_group, stop_pids
from . import images
from .kernel import REPO, Kernel, find_kernel

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
# the checkout's Python folders, byte-compiled here before a boot (bytecode())
PACKAGES = ("ccrig", "analysis", "experiments", "qdiscs", "tcp_modules", "topologies", "tests")



# --- KVM or TCG -------------------------------------------------------------------------------------------

def _cache_path() -> Path:
    return cache_dir() / "vm-accel.json"


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


def guest_command(argv: list[str], env: dict[str, str] | None = None, disks: list[images.Image] = ()) -> str:
    """The shell line vng runs in the guest: the Python trees' images mounted (images.py), then argv with an
    environment that finds this repository's tools. The guest's root is the host's, read-only; bytecode caches
    are not written there."""
    # CCRIG_JOBS=1: pairs one at a time in the guest (--jobs auto would calibrate an emulated CPU, whose capacity
    # says nothing, on a checkout it cannot cache in)
    # XDG_CACHE_HOME: this machine's cache (read-only there), where the native programs built here before the boot
    # are found (the C sampler, the queue monitor): built in the guest they cost 25 s of emulated compiling a boot
    # CCRIG_GIT_REVISION, CCRIG_TOOL_VERSIONS: the checkout's revision and the tools' versions as read here (the
    # guest's root is this machine's: machine.git_revision, machine.tool_versions)
    base = {"PATH": f"{VENV_BIN}:{GUEST_PATH}", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp",
            "XDG_CACHE_HOME": str(cache_dir().parent),
            "MPLCONFIGDIR": "/tmp/matplotlib", "PYTHONUNBUFFERED": "1", "CCRIG_JOBS": "1",
            GIT_ENV: json.dumps(git_revision(), separators=(",", ":")),
            TOOLS_ENV: json.dumps(tool_versions(), separators=(",", ":"))}
    for name in ("CI", "CCRIG_PROMETHEUS_URL"):
        if name in os.environ:
            base[name] = os.environ[name]
    base.update(env or {})
    return images.mounts(list(disks)) + "exec " + shlex.join(["env", *(f"{k}={v}" for k, v in base.items()), *argv])


def guest_name(prefix: str | None = None) -> str:
    """The guest's name (qemu -name, the guest's hostname): the run's prefix, so `ccrig clean` finds it."""
    return prefix or f"ccrig-{os.getpid()}"


def vng_argv(kernel: Kernel, command: str, accel: str, cwd: Path = REPO, rwdirs: tuple[Path, ...] = (),
             memory: str = MEMORY, cpus: int = CPUS, name: str | None = None, qemu_opts: str = "",
             tmpdir: Path | None = None) -> list[str]:
    """The vng command line. The guest runs as root (namespaces, tc, modprobe) with the host's root file system
    read-only and each of rwdirs shared read-write at the same path, so what the guest writes there is where
    the host reads it. 9p is forced: vng would otherwise try qemu's C virtiofsd, fail, and lose ~3 s. tmpdir:
    where virtme-run makes its files (its exit status file is removed at exit, which a stopped guest never
    reaches: /tmp/virtme_ret* was left behind after CI)."""
    if accel not in ACCELS:
        raise InputError(f"accel: got {accel!r}; expected one of {', '.join(ACCELS)}")
    # vng starts virtme-run through PATH: the environment's scripts folder goes first
    path = f"PATH={Path(vng()).parent}:{os.environ.get('PATH', GUEST_PATH)}"
    argv = ["env", path, *([f"TMPDIR={tmpdir}"] if tmpdir is not None else []), vng(), "--run", str(kernel.image),
            "--user", "root", "--memory", memory, "--cpus", str(cpus), "--force-9p", "--cwd", str(cwd),
            "--name", guest_name(name)]
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


def bytecode(commands: Commands) -> None:
    """Compiles the checkout's modules here, where it is writable: the guest sees it read-only and writes no
    bytecode, so every Python process in the guest compiled each module it imports from source again (~5 s of a
    study's start under TCG), and this machine's own processes may not have written it either
    (PYTHONDONTWRITEBYTECODE). Up to date, it costs a fraction of a second; a file that does not compile is the
    guest's to report, so its status is not checked."""
    dirs = [str(REPO / p) for p in PACKAGES if (REPO / p).is_dir()]
    commands.run([sys.executable, "-m", "compileall", "-q", *dirs], check=False, timeout=300)


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
    killed (RunError); so is one interrupted by Ctrl-C (the interrupt goes on)."""
    if not isinstance(kernel, Kernel):
        kernel = find_kernel(kernel)
    commands = commands or Commands(None)
    mode = accel or accel_mode(kernel, commands)
    bytecode(commands)
    disks = images.for_guest(commands, warn=lambda line: output(line + "\n"))
    opts = " ".join(o for o in (qemu_opts, images.qemu_opts(disks)) if o)
    # the command goes in a file the guest reads (the host's root is its root): vng hands --exec to the guest on
    # the kernel's command line, base64-encoded, and x86 truncates that line at 2048 bytes; a guest tier's pytest
    # line with the images' mounts went past it and the guest's init hung, idle, without a word
    command = guest_command(argv, env, disks)
    script = _command_file(guest_name(name), command)
    commands.note(["install", "-m", "600", "/dev/stdin", str(script)], "put", input=command)  # replayable by hand
    deadline = time.monotonic() + timeout
    pending, proc = b"", None
    tmp = Path(tempfile.mkdtemp(prefix=f"{guest_name(name)}-vng-"))
    try:
        full = vng_argv(kernel, f"sh {shlex.quote(str(script))}", mode, cwd, rwdirs, memory, cpus, name, opts, tmp)
        proc = commands.popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
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
        if proc is not None:
            _kill_group(proc)
        script.unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


def _command_file(name: str, command: str) -> Path:
    """The guest's shell command in a file of its own under the cache folder (named after the guest)."""
    folder = cache_dir() / "vm-commands"
    folder.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=".sh", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(command + "\n")
    return Path(path)


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
    # the command files of guests whose runs were killed outright (run_in_guest removes its own); every guest
    # not kept was stopped above
    for path in (cache_dir() / "vm-commands").glob(f"{prefix}*.sh"):
        if not keep(path.name.rsplit("-", 1)[0]):
            path.unlink(missing_ok=True)
    # and their virtme-run folders (run_in_guest's tmp, named NAME-vng-XXXX)
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*-vng-*"):
        if path.is_dir() and not keep(path.name.rsplit("-vng-", 1)[0]):
            shutil.rmtree(path, ignore_errors=True)
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


