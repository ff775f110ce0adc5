"""Children that a test interrupts. A shell starts a background job (`make test &`, nohup) with SIGINT ignored,
and an ignored signal stays ignored across fork and exec: Python keeps SIG_IGN instead of installing its
KeyboardInterrupt handler, so a ccrig started from such a pytest would not answer a test's Ctrl-C until its own
handler is installed. The child sets the default disposition for itself; pytest's own is left as it was."""
from __future__ import annotations

import signal
import subprocess
from contextlib import contextmanager
from types import SimpleNamespace


def default_sigint() -> None:
    """preexec_fn for a child a test sends SIGINT: the disposition a terminal's foreground job has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# s: how long a run may take to end after SIGINT or SIGTERM on a busy 2-core machine (seen in CI: 10.1 s in a 30-flow
# run's measurement phase, the host tier's three workers beside a TCG guest); the goal of 5 s lives in `make bench`
# (bench_scale: SIGINT in a 100-flow set-up). A run that hangs on a signal meets communicate's timeout instead.
SIGNAL_BOUND = 20


@contextmanager
def terminated(proc: subprocess.Popen, timeout: float):
    """A long-lived child the body talks to: on leaving, SIGTERM and its output so far (`out`, bytes, read to its
    end); killed instead if the body failed or it outlived `timeout`, so no test leaves one behind."""
    result = SimpleNamespace(out=b"")
    try:
        yield result
        proc.send_signal(signal.SIGTERM)
        result.out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
