"""Many `ccrig` command lines from one interpreter that imported the command line once: each runs in a process of its
own, forked from it (its own pid, exit status, stdout, stderr, working folder and environment), up to
PARALLEL at a time, through the console script's own function (ccrig.experiments.cli.entry.main).

Why: a fresh interpreter spends about 0.7 s of CPU importing typer, pydantic and the kinds' modules before the
first line of ccrig runs. The bad-input corpus's 122 cases paid it 122 times: 86 s of CPU and 294 s of a test
worker beside a TCG guest in CI (2026-11-29), for refusals that take milliseconds themselves.

    python tests/support/cli_forks.py < jobs.json > results.json
jobs: [{"argv": [...], "cwd": DIR, "env": {...}, "timeout": S}, ...] (argv without the leading "ccrig"); results,
in the same order: {"rc", "pid", "stdout", "stderr"}; rc is the process's exit status (-N: killed by signal N), and
a process still running at its timeout is killed (SIGKILL) and says so at the end of its stderr."""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback

PARALLEL = 4


def _child(job: dict, out: str) -> None:
    """In the forked process: become the command line `ccrig ARGV` and exit with its status."""
    code = 1
    try:
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        for fd, name in ((1, "stdout"), (2, "stderr")):
            f = os.open(f"{out}.{name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        sys.argv = ["ccrig", *job["argv"]]
        from ccrig.experiments.cli.entry import main
        try:
            main()
            code = 0
        except SystemExit as e:   # what the interpreter does with it at exit
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
    except BaseException:   # an uncaught exception: the traceback and status 1, as an interpreter's would be
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _result(job: dict, out_: str, pid: int, status: int, killed: bool) -> dict:
    out = {}
    for name in ("stdout", "stderr"):
        path = f"{out_}.{name}"
        with open(path, errors="replace") as f:
            out[name] = f.read()
        os.unlink(path)
    if killed:
        out["stderr"] += f"\n(killed after {job['timeout']} s: the input was not refused)"
    return {"rc": os.waitstatus_to_exitcode(status), "pid": pid, **out}


def run(jobs: list[dict], scratch: str) -> list[dict]:
    """Each job's outcome; their output files are kept in scratch meanwhile."""
    results: list[dict | None] = [None] * len(jobs)
    running: dict[int, tuple[int, int, float]] = {}   # pidfd: (index, pid, deadline)
    waiting = list(range(len(jobs)))
    while waiting or running:
        while waiting and len(running) < PARALLEL:
            k = waiting.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(jobs[k], os.path.join(scratch, str(k)))
            running[os.pidfd_open(pid)] = (k, pid, time.monotonic() + jobs[k]["timeout"])
        # readiness, not a sleep: a pidfd is readable once its process has ended
        nearest = min(d for _, _, d in running.values())
        ready, _, _ = select.select(list(running), [], [], max(0.0, nearest - time.monotonic()))
        now = time.monotonic()
        for fd in list(running):
            k, pid, deadline = running[fd]
            killed = fd not in ready and now >= deadline
            if fd not in ready and not killed:
                continue
            if killed:
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            os.close(fd)
            del running[fd]
            results[k] = _result(jobs[k], os.path.join(scratch, str(k)), pid, status, killed)
    return results


if __name__ == "__main__":
    importlib.import_module("ccrig.experiments.cli.app")   # the imports every fork then shares
    with tempfile.TemporaryDirectory(prefix=f"ccrig-forks-{os.getpid()}-") as scratch:
        json.dump(run(json.load(sys.stdin), scratch), sys.stdout)
