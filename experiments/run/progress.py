"""The progress bar of a run (measured intervals done / to do), or none (`--no-progress`)."""
from __future__ import annotations


class NoBar:
    def advance(self, n: int = 1) -> None:
        pass

    def more(self, n: int) -> None:
        """n more intervals to do (a repetition run again)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Bar(NoBar):
    def __init__(self, total: int):
        from rich.progress import BarColumn, Progress, TimeRemainingColumn  # lazy: only a terminal shows it
        self.p = Progress("[progress.description]{task.description}", BarColumn(),
                          "{task.completed}/{task.total} intervals", TimeRemainingColumn(), transient=True)
        self.task = self.p.add_task("measuring", total=total)

    def advance(self, n: int = 1) -> None:
        self.p.advance(self.task, n)

    def more(self, n: int) -> None:
        self.p.update(self.task, total=self.p.tasks[0].total + n)

    def __enter__(self):
        self.p.start()
        return self

    def __exit__(self, *exc):
        self.p.stop()
        return False


def progress(enabled: bool, total: int) -> NoBar:
    return Bar(total) if enabled else NoBar()
