"""The live display of ``worldsim run`` on standard error: tick steps, timelines, forks, and the
model calls that have been waiting a while.

Imported when a run starts (never for ``--help``): it loads rich's progress machinery.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from worldsim.models.inflight import describe, in_flight

__all__ = ["RunProgress", "in_flight_column", "run_progress"]


def run_progress(console: Console, *, show: bool) -> Progress:
    """The display the runs of one command share (one task a run; nothing when not ``show``)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} tick steps"),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        in_flight_column(),
        console=console,
        disable=not show,
        transient=True,
    )


class RunProgress:
    """Turns one run's engine events into its task of the display (an engine observer)."""

    def __init__(self, progress: Progress, label: str, ticks: int) -> None:
        self.progress = progress
        self.task = progress.add_task(label, total=ticks, status="")
        self.ticks = ticks
        self.timelines = 0
        self.forks = 0
        self.rejected = 0
        self.tick_steps = 0

    def __call__(self, event: str, payload: Any) -> None:
        if event == "timeline_started":
            self.timelines += 1
            self.progress.update(self.task, total=self.ticks * self.timelines)
        elif event == "fork":
            self.forks += 1
        elif event == "fork_rejected":
            self.rejected += 1
        elif event == "tick_committed":
            self.tick_steps += 1
            self.progress.update(self.task, completed=self.tick_steps)
        elif event == "timeline_ended":
            # a timeline that ends early gives back its unrun ticks
            done = self.tick_steps
            self.progress.update(self.task, completed=done)
        self.progress.update(
            self.task,
            status=f"timelines {self.timelines} · forks {self.forks} · rejected {self.rejected}",
        )


class _InFlight(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(describe(in_flight(min_elapsed_s=2.0)), style="yellow")


def in_flight_column() -> ProgressColumn:
    """A progress column naming the model calls that have waited 2 s or more, the longest
    first, with their elapsed time and the chunks streamed so far (redrawn live)."""
    return _InFlight()
