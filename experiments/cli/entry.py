"""The `ccrig` console script. The command line's libraries (pydantic, typer, the kinds' modules) take a second or
more to import on a slow machine; a Ctrl-C then must end as one anywhere else does: one line, exit 130, no
traceback. So the script's module imports nothing, and the command line is imported under the guard."""
import signal
import sys


def main() -> None:
    # a Ctrl-C among the imports is noted, not raised: raised inside a library's compiled code it comes out as that
    # library's error with a traceback (pydantic-core building a model's schema: "SchemaError: ... KeyboardInterrupt",
    # CI 2026-11-28). A SIGINT the caller ignores (a background job) stays ignored.
    # (experiments/run/signals.py defers signals the same way, but importing it is what this guards)
    interrupted = []
    previous = signal.getsignal(signal.SIGINT)
    guard = previous not in (signal.SIG_IGN, None)   # None: a handler set outside Python, left alone
    if guard:
        signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    try:
        from ccrig.experiments.cli.app import main as cli_main  # lazy: the import is what the guard covers
    finally:
        if guard:
            signal.signal(signal.SIGINT, previous)
    if interrupted:
        sys.stderr.write("ccrig: interrupted\n")
        sys.exit(130)
    cli_main()
