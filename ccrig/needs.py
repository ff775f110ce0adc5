"""A need: one thing a run requires of a machine (a kernel feature, a tool, a privilege), whether the machine has
it, and how to get it when it does not. Preflight gathers them from every part of a run before anything is set up:
the testbeds, the queue disciplines, the laws, PAUSE."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Need:
    feature: str
    needed_by: str
    ok: bool
    how: str = ""

    def problem(self) -> str:
        return f"{self.feature} (needed by {self.needed_by}) is missing: {self.how}"
