"""This machine as env.json records it (kernel, sysctls, tool versions, the git revision of ccrig), so a run can be
reproduced and its numbers interpreted."""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ccrig.commands import Commands

SYSCTLS = ["net.ipv4.tcp_available_congestion_control", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_ecn",
           "net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps", "net.ipv4.tcp_window_scaling", "net.ipv4.tcp_rmem",
           "net.ipv4.tcp_wmem", "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_limit_output_bytes",
           "net.ipv4.tcp_autocorking", "net.ipv4.tcp_mtu_probing", "net.core.default_qdisc"]
TOOLS = {"iperf3": ["iperf3", "--version"], "tc": ["tc", "-V"], "ip": ["ip", "-V"],
         "ethtool": ["ethtool", "--version"], "prometheus": ["prometheus", "--version"]}
ROOT = Path(__file__).resolve().parent.parent  # the repository (ccrig/ is at its top)


def cache_dir() -> Path:
    """Where this machine keeps what ccrig builds for it once (the native sampler, the delay line, the queue
    monitor, the vm's accelerator probe): ~/.cache/ccrig, or under $XDG_CACHE_HOME."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ccrig"


@contextlib.contextmanager
def cache_lock(name: str, folder: Path | None = None):
    """Holds an exclusive lock named `name` in the cache folder (or `folder`): a second process building the same
    thing waits for the first. Released when the block ends, also if this process dies."""
    folder = folder or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys/" + name.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def _first_line(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (p.stdout or p.stderr).strip()
    return text.splitlines()[0] if text else None


# What cannot change while this process runs (the kernel booted, the tools installed, the code it imported at
# start) is asked once: a study records every spec's env.json, and in an emulated guest these commands and git's
# walk of the checkout over 9p took seconds per spec.
@functools.cache
def kernel_config_hash() -> str | None:
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{platform.release()}")):
        if path.exists():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    return None


# A vm guest's root is the host's, so its tools are the host's files and its checkout the host's checkout: the host
# that boots it hands its own answers in. Asked in the guest, git's walk of the checkout over 9p took 10 s of an
# emulated CPU per process, and the five tools' versions 4 s (prometheus, a Go binary, most of it)
GIT_ENV = "CCRIG_GIT_REVISION"
TOOLS_ENV = "CCRIG_TOOL_VERSIONS"


@functools.cache
def tool_versions() -> dict:
    handed = os.environ.get(TOOLS_ENV)
    if handed:
        return json.loads(handed)
    return {k: _first_line(v) for k, v in TOOLS.items()}


@functools.cache
def git_revision() -> dict:
    handed = os.environ.get(GIT_ENV)
    if handed:
        return json.loads(handed)

    def git(*args):
        try:
            return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain"))}


def host(commands: Commands) -> dict:
    u = platform.uname()
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": u.node,
        "kernel": {"release": u.release, "version": u.version, "machine": u.machine,
                   "config_sha256": kernel_config_hash()},
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "sysctls": {k: _sysctl(k) for k in SYSCTLS},
        "tools": dict(tool_versions()),
        "git": dict(git_revision()),
        "argv": sys.argv,
    }
