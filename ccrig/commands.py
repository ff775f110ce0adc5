"""Every external command ccrig runs goes through here: an argv list, logged so a run can be replayed by hand.

The log (commands.log in the run archive) has one line per command: the time since the log was opened, the
exit status (or "&" for a background process) and the command as a shell line.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from pathlib import Path
from typing import Protocol

from .errors import RunError


def batch_text(lines: list[list[str]]) -> str:
    """argv lists as the lines of a `-batch` file (without the program name)."""
    return "".join(shlex.join(l) + "\n" for l in lines)


def keep_priority(pid: int) -> None:
    """Gives the new session of process pid the caller's nice. A new session is a new autogroup
    (CONFIG_SCHED_AUTOGROUP), which the scheduler weighs against the caller's group whatever either's nice: a run
    started at a priority (`nice ccrig run`, a guest the test suite puts ahead of the host tier) would lose it in
    every background process it starts."""
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if nice == 0:   # a new autogroup's own
        return
    try:
        Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")
    except OSError:   # no autogroups in this kernel, the process gone, or a raise without CAP_SYS_NICE
        pass


# Programs that enter a namespace themselves, by its name, with the set-up `ip netns exec` makes (iproute2's
# netns_switch: setns, a mount namespace of its own with /sys remounted, /etc/netns bound): one process start instead
# of two. A `tc -s -j qdisc show` took 26 ms through `ip netns exec` and 6 ms with `tc -n` here (200 of each), and
# a run asks for one per interval per bottleneck; a TCG guest pays several times that for every process start
OWN_SWITCH = {"ip": "-n", "tc": "-n", "ss": "-N"}

# Every process started into a namespace carries its name in its environment (and so do its children): a process
# that outlives its namespace's name (one that entered while a killed run's namespaces were being removed) keeps the
# namespace alive unnamed, where no inode of a named one matches it; the tag still says whose it is, so a removal or
# `ccrig clean --prefix` finds it (topologies/testbeds/netns.py). Not logged: a replay by hand needs no tag.
NETNS_TAG = "CCRIG_NETNS"


def tagged_env(ns: str | None) -> dict | None:
    """The environment of a process started into namespace ns (None: the caller's own, untagged)."""
    return None if ns is None else {**os.environ, NETNS_TAG: ns}


def in_netns(ns: str | None, argv: list[str]) -> list[str]:
    """argv as run inside network namespace ns (None: the current one)."""
    if ns is None:
        return list(argv)
    if argv and argv[0] in OWN_SWITCH:
        return [argv[0], OWN_SWITCH[argv[0]], ns, *argv[1:]]
    return ["ip", "netns", "exec", ns, *argv]


class Commands:
    """Runs argv lists and logs them. One per run; log_path None logs nowhere (e.g. `ccrig clean`)."""

    def __init__(self, log_path: Path | None = None):
        self.log_path = log_path
        self._t0 = time.monotonic()
        self._lock = threading.Lock()

    def note(self, argv: list[str], status: str = "&", input: str | None = None) -> None:
        """Logs a command started by other means than run() or popen() (one that needs a pipe of its own, or
        an environment): every external command is in commands.log, however it was started. A file written
        for a command is logged with its text as input (a here-document), so it replays as written."""
        self._log(argv, status, input)

    def _log(self, argv: list[str], status: str, input: str | None = None) -> None:
        if self.log_path is None:
            return
        line = f"{time.monotonic() - self._t0:10.3f} {status:>4} {shlex.join(argv)}\n"
        if input is not None:  # a batch fed on stdin: logged as a here-document, so it replays as written
            line = line[:-1] + " <<'EOF'\n" + input.rstrip("\n") + "\nEOF\n"
        with self._lock, open(self.log_path, "a") as f:
            f.write(line)

    def run(self, argv: list[str], ns: str | None = None, check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        full = in_netns(ns, argv)
        try:
            proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=input,
                                  env=tagged_env(ns))
        except FileNotFoundError as e:
            self._log(full, "ENOENT", input)
            raise RunError(f"command not found: {full[0]} (run `make deps`)") from e
        except subprocess.TimeoutExpired as e:
            self._log(full, "TIME", input)
            raise RunError(f"command timed out after {timeout:g} s: {shlex.join(full)}") from e
        self._log(full, str(proc.returncode), input)
        if check and proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            # a batch or script names its failing line after the error itself: show the error
            errors = [m for m in msg if m.startswith(("Error", "RTNETLINK", "Cannot", "ethtool:"))]
            shown = errors[0] if errors else (msg[-1] if msg else "no output")
            what = shlex.join(full) if input is None else f"{shlex.join(full)} (batch in commands.log)"
            raise RunError(f"command failed ({proc.returncode}): {what}: {shown}")
        return proc

    def batch(self, argv: list[str], lines: list[list[str]], ns: str | None = None, timeout: float = 60) -> None:
        """Runs many commands through one process (`ip -batch -`, `tc -batch -`): lines are argv lists
        without the program name. Setting up a 30-sender dumbbell one process per command takes tens of
        seconds; batched it takes well under one."""
        if lines:
            self.run(argv, ns=ns, timeout=timeout, input=batch_text(lines))

    def script(self, steps: list[tuple[list[str], str | None]], timeout: float = 120) -> None:
        """Runs many commands, each an argv with optional stdin, from one `sh` (stopping at the first
        failure). Spawning a process from Python costs tens of milliseconds on a busy machine; a shell's
        fork costs one, so a 30-sender dumbbell comes up in about a second this way. The log holds the
        script itself, which replays as written."""
        lines = ["set -e"]
        for argv, stdin in steps:
            if stdin is None:
                lines.append(shlex.join(argv))
            else:
                lines.append(f"{shlex.join(argv)} <<'CCRIG_EOF'\n{stdin.rstrip(chr(10))}\nCCRIG_EOF")
        self.run(["sh", "-s"], timeout=timeout, input="\n".join(lines) + "\n")

    def ok(self, argv: list[str], ns: str | None = None, timeout: float = 60) -> bool:
        """Runs argv and says whether it succeeded, for probes and best-effort teardown."""
        try:
            return self.run(argv, ns=ns, check=False, timeout=timeout).returncode == 0
        except RunError:
            return False

    def popen(self, argv: list[str], ns: str | None = None, stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL) -> subprocess.Popen:
        """Starts argv in the background in its own process group, so teardown can signal all of it."""
        full = in_netns(ns, argv)
        self._log(full, "&")
        try:
            proc = subprocess.Popen(full, stdin=stdin, stdout=stdout, stderr=stderr, start_new_session=True,
                                    env=tagged_env(ns))
        except FileNotFoundError as e:
            raise RunError(f"command not found: {full[0]} (run `make deps`)") from e
        keep_priority(proc.pid)
        return proc


class Node(Protocol):
    """Where commands run: a namespace of this machine, a Mininet host, a host over SSH. Everything that acts on
    a node (testbeds, the law manager, ethtool, the qdisc probe, provisioning) takes one of these, and every
    implementation goes through Commands, so each argv lands in commands.log."""

    def run(self, argv: list[str], check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Runs argv and waits; check raises RunError on a non-zero exit."""

    def popen(self, argv: list[str], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL) -> subprocess.Popen:
        """Starts argv in the background (stopping the Popen's process group stops it)."""

    def put(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        """Writes a file on the node."""


class Local:
    """This machine, or one of its network namespaces, as a Node."""

    def __init__(self, commands: Commands, ns: str | None = None):
        self.commands, self.ns = commands, ns

    def run(self, argv: list[str], check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        return self.commands.run(argv, ns=self.ns, check=check, timeout=timeout, input=input)

    def ok(self, argv: list[str], timeout: float = 60) -> bool:
        return self.commands.ok(argv, ns=self.ns, timeout=timeout)

    def popen(self, argv: list[str], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL) -> subprocess.Popen:
        return self.commands.popen(argv, ns=self.ns, stdin=stdin, stdout=stdout, stderr=stderr)

    def put(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        # the file system is shared by every namespace of this machine: write it directly, logged as what
        # would do the same by hand
        self.commands.note(["install", "-m", f"{mode:o}", "/dev/stdin", path], "put")
        raw = data.encode() if isinstance(data, str) else data
        Path(path).write_bytes(raw)
        os.chmod(path, mode)
