"""The command line: `ccrig` and its subcommands (app.py), the study commands (study.py), `compare`, and the
terminal's tables. `from ccrig.experiments.cli import main` is the one entry point; it imports nothing heavy
until it runs (entry.py says why)."""
from ccrig.experiments.cli.entry import main

__all__ = ["main"]
