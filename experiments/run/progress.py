"""The progress bar of a run (measured intervals done / to do), a study's live status line, or neither
(`--no-progress`)."""
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


class Status(NoBar):
    """A study's live line (experiments/run/budget.status), redrawn every two seconds by rich's own thread.
    A line that cannot be made (a file being replaced as it is read) keeps the last one: the display must
    never be what stops a study."""

    def __init__(self, line):
        from rich.live import Live  # lazy: only a terminal shows it
        from rich.text import Text  # lazy: as above
        self.line, self.last = line, "study: starting"

        def render():
            try:
                self.last = self.line()
            except Exception:   # whatever it is, it must not end rich's thread nor reach the study
                pass
            return Text(self.last)
        self.live = Live(get_renderable=render, refresh_per_second=0.5, transient=True)

    def __enter__(self):
        self.live.start()
        return self

    def __exit__(self, *exc):
        self.live.stop()
        return False


def status_display(enabled: bool, line) -> NoBar:
    return Status(line) if enabled else NoBar()
