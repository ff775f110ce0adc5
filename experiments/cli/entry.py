"""The `ccrig` console script. The command line's libraries (pydantic, typer, numpy, the kinds' modules) take a
second or more to import on a slow machine; a Ctrl-C then must end as one anywhere else does: one line, exit 130,
no traceback. So the script's module imports nothing, and the command line is imported under the guard."""
import sys


def main() -> None:
    try:
        from ccrig.experiments.cli.app import main as cli_main  # lazy: the import is what the guard covers
    except KeyboardInterrupt:
        sys.stderr.write("ccrig: interrupted\n")
        sys.exit(130)
    cli_main()
