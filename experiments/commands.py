"""Every external command ccrig runs goes through here: an argv list, logged so a run can be replayed by hand.

The log (commands.log in the run archive) has one line per command: the time since the log was opened, the
exit status (or "&" for a background process) and the command as a shell line.
"""
from __future__ import annotations

import shlex
import subprocess
import threading
import time
from pathlib import Path

from .errors import RunError


def in_netns(ns: str | None, argv: list[str]) -> list[str]:
    """argv as run inside network namespace ns (None: the current one)."""
    return list(argv) if ns is None else ["ip", "netns", "exec", ns, *argv]


class Commands:
    """Runs argv lists and logs them. One per run; log_path None logs nowhere (e.g. `ccrig clean`)."""

    def __init__(self, log_path: Path | None = None):
        self.log_path = log_path
        self._t0 = time.monotonic()
        self._lock = threading.Lock()

    def _log(self, argv: list[str], status: str) -> None:
        if self.log_path is None:
            return
        line = f"{time.monotonic() - self._t0:10.3f} {status:>4} {shlex.join(argv)}\n"
        with self._lock, open(self.log_path, "a") as f:
            f.write(line)

    def run(self, argv: list[str], ns: str | None = None, check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        full = in_netns(ns, argv)
        try:
            proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=input)
        except FileNotFoundError as e:
            self._log(full, "ENOENT")
            raise RunError(f"command not found: {full[0]} (run `make deps`)") from e
        except subprocess.TimeoutExpired as e:
            self._log(full, "TIME")
            raise RunError(f"command timed out after {timeout:g} s: {shlex.join(full)}") from e
        self._log(full, str(proc.returncode))
        if check and proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise RunError(f"command failed ({proc.returncode}): {shlex.join(full)}: "
                           f"{msg[-1] if msg else 'no output'}")
        return proc

    def ok(self, argv: list[str], ns: str | None = None, timeout: float = 60) -> bool:
        """Runs argv and says whether it succeeded, for probes and best-effort teardown."""
        try:
            return self.run(argv, ns=ns, check=False, timeout=timeout).returncode == 0
        except RunError:
            return False

    def popen(self, argv: list[str], ns: str | None = None, stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL) -> subprocess.Popen:
        """Starts argv in the background in its own process group, so teardown can signal all of it."""
        full = in_netns(ns, argv)
        self._log(full, "&")
        try:
            return subprocess.Popen(full, stdout=stdout, stderr=stderr, start_new_session=True)
        except FileNotFoundError as e:
            raise RunError(f"command not found: {full[0]} (run `make deps`)") from e
