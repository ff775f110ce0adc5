"""Stopping processes: ask politely (SIGTERM), wait, then insist (SIGKILL). The one way every part of ccrig ends
what it started: workloads, samplers, guests, the PAUSE controller, leftovers of killed runs."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path


KILLED_WITHIN = 10.0   # seconds a SIGKILLed process may take to end (one in uninterruptible sleep takes its time)


def stop_group(proc: subprocess.Popen, grace: float = 2.0) -> None:
    """Ends a process started in a session of its own (Commands.popen) and everything in its process group:
    SIGTERM to the group, then SIGKILL to what is left after grace seconds. Returns once the process and the rest
    of its group have exited: a leader that exits first (vng) can leave a member still ending (its qemu, seen
    alive after run_in_guest returned on a loaded CI machine)."""
    if proc.poll() is not None:
        # not its group's members: with the leader long gone its pid may lead another session by now (pid_max
        # is 32768 here, and every Commands.popen starts a session), and that one is not ours to stop
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(grace)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # reap it: a group already gone (or not ours) still leaves our child to wait for
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    # a member still running keeps the pid from being reused, so the group is still the one signalled above
    stop_pids(lambda: group_members(proc.pid), grace)


def _stat(pid: int | str) -> tuple[str, int] | None:
    """(state, process group) of a process, None when there is none."""
    try:
        state, _, pgrp = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:3]
        return state, int(pgrp)
    except (OSError, ValueError):
        return None


def waiting_in(pid: int, frames: int = 4) -> str | None:
    """Where a process waits, as the kernel says: its name, state and the innermost frames of its kernel stack (root
    reads /proc/PID/stack; else the one function of wchan), e.g. "iperf3 S in do_select < core_sys_select"; None
    when it has ended. A client past its time says whether it waits on a socket, a timer or nothing (R: running).
    The name tells the program from what runs it elsewhere (ssh, a guest's agent)."""
    stat = _stat(pid)
    if stat is None:
        return None
    try:
        stack = [ln.split()[1].split("+")[0] for ln in Path(f"/proc/{pid}/stack").read_text().splitlines()]
    except (OSError, IndexError):
        stack = [w for w in [_read(f"/proc/{pid}/wchan")] if w and w != "0"]
    name = _read(f"/proc/{pid}/comm") or "?"
    said = f"{name} {stat[0]} in {' < '.join(stack[:frames])}" if stack else f"{name} {stat[0]}"
    call = _syscall(pid) if stat[0] in "SD" else ""
    return f"{said}, {call}" if call else said


# x86_64's numbers of the calls a program waits in; elsewhere the call is not named
_SYSCALLS = {0: "read", 1: "write", 7: "poll", 23: "select", 232: "epoll_wait", 270: "pselect6", 271: "ppoll"}


def _syscall(pid: int) -> str:
    """The system call a sleeping process waits in (/proc/PID/syscall, root). A select whose timeout (its fifth
    argument) is NULL waits on its descriptors alone, with no timer of the program's to wake it: what tells a held
    iperf3 client that lost its timers from one whose timers run (study 001, a client held 130 s in select)."""
    words = _read(f"/proc/{pid}/syscall").split()
    if os.uname().machine != "x86_64" or len(words) < 6 or not words[0].isdigit():
        return ""
    name = _SYSCALLS.get(int(words[0]), f"system call {words[0]}")
    if name in ("select", "pselect6"):
        return f"{name} with {'no timeout' if int(words[5], 16) == 0 else 'a timeout'}"
    return name


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def group_members(pgid: int) -> list[int]:
    """The processes of process group pgid that still run (zombies, already ended, are not counted)."""
    out = []
    for d in Path("/proc").iterdir():
        stat = _stat(d.name) if d.name.isdigit() else None
        if stat and stat[1] == pgid and stat[0] != "Z":
            out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    """Does pid still run? A zombie has ended: where nobody reaps orphans (pid 1 of some containers) it stays."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def wait_gone(pids, timeout: float) -> bool:
    """Waits until none of pids runs any more; says whether that happened within timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if not any(alive(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def stop_pids(find, grace: float = 2.0) -> int:
    """Ends processes that are not our children: SIGTERM, wait up to grace seconds, then SIGKILL whatever is still
    there. `find()` lists the pids to signal (asked again before SIGKILL, so processes started meanwhile are
    caught too); a list of pids may be given instead. Returns how many were signalled at the most, once they have
    ended: a SIGKILLed process on a loaded machine still runs until it is scheduled."""
    if not callable(find):
        fixed = list(find)
        find = lambda: [p for p in fixed if alive(p)]
    count = 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = list(find())
        if not pids:
            break
        count = max(count, len(pids))
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if wait_gone(pids, grace if sig == signal.SIGTERM else KILLED_WITHIN):
            break
    return count


def wait_for_line(proc: subprocess.Popen, stream, says: str, timeout: float) -> str:
    """Reads a started program's stream (its stderr, a pipe) line by line until a line containing `says` (the
    program is ready), the stream ends, the program exits or timeout passes. Returns the last line read: the ready
    line, or what it said instead. Reads the file descriptor unbuffered, so what follows stays in the pipe."""
    deadline = time.monotonic() + timeout
    line = b""
    last = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], 0.1)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        c = os.read(stream.fileno(), 1)
        if not c:
            break
        if c != b"\n":
            line += c
            continue
        last, line = line.decode(errors="replace").strip(), b""
        if says in last:
            return last
    return last or line.decode(errors="replace").strip()
