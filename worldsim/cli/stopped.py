"""What a stopped ``worldsim run`` left, and the command that finishes it: the line Ctrl-C or
SIGTERM ends it with, and the end of a budget stop's line."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from worldsim.cli._app import on_budget
from worldsim.domain.errors import RoleError, WorldsimError

if TYPE_CHECKING:
    from worldsim.domain.config import RunConfig
    from worldsim.trace.reader import TraceLine

__all__ = [
    "going_on",
    "on_role_failure",
    "replicates_left",
    "resume_with_more",
    "runs_left",
    "unfinished",
]


def unfinished(trace: Path) -> str:
    """What Ctrl-C left of the run writing ``trace``, and the command that finishes it."""
    return f"{trace} is unfinished; `worldsim run --resume {trace}` finishes it"


def runs_left(out: Path, configs: list[RunConfig], returned: int) -> str:
    """What an interrupt left of the runs of ``configs`` into ``out`` once ``returned`` of them
    had returned (the next may have completed as the interrupt came), and what finishes it."""
    from worldsim.sim.plan import trace_name

    finished = returned
    ended = _terminal(out / trace_name(configs[finished])) if finished < len(configs) else None
    if ended is not None and ended.type == "run_completed":
        finished += 1  # it ended as the interrupt came
    if finished == len(configs):
        return f"every run finished; its trace is in {out}"
    trace = out / trace_name(configs[finished])
    said = (
        unfinished(trace)
        if trace.exists()
        else f"no trace was written for seed {configs[finished].seed}"
    )
    return said + replicates_left(configs, finished)


def replicates_left(configs: list[RunConfig], finished: int) -> str:
    """How many of the replicates ``configs`` finished (the first ``finished``), and the
    command that runs those after the one that stopped; nothing for a single run."""
    if len(configs) == 1:
        return ""
    said = f"; {finished} of {len(configs)} runs finished"
    later = [c.seed for c in configs[finished + 1 :]]
    if later:
        seeds = f"seed {later[0]}" if len(later) == 1 else f"seeds {later[0]}–{later[-1]}"
        said += (
            f"; {seeds} not started (the same command with `--seed {later[0]} "
            f"--replicates {len(later)}` runs {'it' if len(later) == 1 else 'them'})"
        )
    return said


def _terminal(trace: Path) -> TraceLine | None:
    """The sealed record ``trace`` ends with (streamed: only the last line is held); None for
    a trace that ends otherwise, is missing or does not read."""
    from worldsim.trace.reader import TraceStream

    stream = TraceStream(trace)
    try:
        for _ in stream:
            pass
    except (OSError, WorldsimError):
        return None
    return stream.terminal


def resume_with_more(trace: Path) -> str:
    """The end of a budget stop's line for a run ``--resume`` carries on."""
    return f": `worldsim run --resume {trace} --max-cost-usd MORE`"


@contextlib.contextmanager
def going_on(trace: Path, then: str = "") -> Iterator[None]:
    """A run stopped by its budget names the command that goes on with a higher one, then
    ``then`` (what else the command left undone); a run stopped by a role, as
    :func:`on_role_failure` says."""
    with (
        on_budget(resume_with_more(trace) + then),
        on_role_failure(trace),
    ):
        yield


@contextlib.contextmanager
def on_role_failure(trace: Path) -> Iterator[None]:
    """A run (or continued run) stopped by a role, its trace sealed resumable, names the
    command that goes on once the role is fixed."""
    try:
        yield
    except RoleError as exc:
        ended = _terminal(trace)
        if ended is None or ended.type != "run_failed" or not ended.data.resumable:
            raise  # refused before the run wrote anything, or before what a resume needs
        raise RoleError(
            f"{exc.message}; the run can be resumed with `worldsim run --resume {trace}` "
            "once the role is fixed",
            file=exc.file,
            field=exc.field,
            line=exc.line,
        ) from None
