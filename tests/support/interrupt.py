"""Children that a test interrupts. A shell starts a background job (`make test &`, nohup) with SIGINT ignored,
and an ignored signal stays ignored across fork and exec: Python keeps SIG_IGN instead of installing its
KeyboardInterrupt handler, so a ccrig started from such a pytest would not answer a test's Ctrl-C until its own
handler is installed. The child sets the default disposition for itself; pytest's own is left as it was."""
from __future__ import annotations

import signal


def default_sigint() -> None:
    """preexec_fn for a child a test sends SIGINT: the disposition a terminal's foreground job has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
