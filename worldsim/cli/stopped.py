"""What a stopped ``worldsim run`` left, and the command that finishes it: the line Ctrl-C or
SIGTERM ends it with, and the end of a budget stop's line."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from worldsim.cli._app import on_budget
from worldsim.domain.errors import WorldsimError

if TYPE_CHECKING:
    from worldsim.domain.config import RunConfig

__all__ = ["going_on", "runs_left", "unfinished"]


def unfinished(trace: Path) -> str:
    """What Ctrl-C left of the run writing ``trace``, and the command that finishes it."""
    return f"{trace} is unfinished; `worldsim run --resume {trace}` finishes it"


def runs_left(out: Path, configs: list[RunConfig], returned: int) -> str:
    """What an interrupt left of the runs of ``configs`` into ``out`` once ``returned`` of them
    had returned (the next may have completed as the interrupt came), and what finishes it."""
    from worldsim.sim.plan import trace_name

    finished = returned
    if finished < len(configs) and _completed(out / trace_name(configs[finished])):
        finished += 1  # it ended as the interrupt came
    if finished == len(configs):
        return f"every run finished; its trace is in {out}"
    trace = out / trace_name(configs[finished])
    said = (
        unfinished(trace)
        if trace.exists()
        else f"no trace was written for seed {configs[finished].seed}"
    )
    if len(configs) == 1:
        return said
    said += f"; {finished} of {len(configs)} runs finished"
    later = [c.seed for c in configs[finished + 1 :]]
    if later:
        seeds = f"seed {later[0]}" if len(later) == 1 else f"seeds {later[0]}–{later[-1]}"
        said += (
            f"; {seeds} not started (the same command with `--seed {later[0]} "
            f"--replicates {len(later)}` runs {'it' if len(later) == 1 else 'them'})"
        )
    return said


def _completed(trace: Path) -> bool:
    """Whether ``trace`` holds a completed run (one that ended as an interrupt came)."""
    from worldsim.trace.reader import read_trace

    try:
        return read_trace(trace).complete
    except (OSError, WorldsimError):
        return False


def going_on(trace: Path) -> contextlib.AbstractContextManager[None]:
    """A run stopped by its budget names the command that goes on with a higher one."""
    return on_budget(f": `worldsim run --resume {trace} --max-cost-usd MORE`")
