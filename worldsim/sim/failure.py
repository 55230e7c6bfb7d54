"""How a run ends when something fails: a sealed ``run_failed``, or, for a cancellation or a
failed write of the trace, nothing at all (the trace stays open-ended, resumable)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import anyio

from worldsim.domain.errors import (
    BudgetExhausted,
    ModelError,
    RoleError,
    TraceError,
    unwrap_error,
)
from worldsim.sim.settlement import RunResult
from worldsim.trace.records import RunFailedData
from worldsim.trace.writer import TraceWriter

__all__ = ["guarded", "resumable", "unwrap_error"]


async def guarded(
    writer: TraceWriter,
    body: Callable[[], Awaitable[RunResult]],
    *,
    has_world: Callable[[], bool],
) -> RunResult:
    """Run ``body``; a failure ends the trace with a sealed ``run_failed`` and is re-raised.
    The record says ``resumable`` for a failure a resume can go on from (a budget, a model
    failure) where ``has_world()``: the trace holds what a resume starts again from.

    ``body`` should hold the run's engine only while it runs, so that the world it leaves
    behind is let go as soon as the run ends.

    Cancellation (Ctrl-C, a kill) writes nothing: the trace stays open-ended, resumable. So
    does a failed write of the trace (a full disk): like a crash, it ends with no ``run_failed``,
    and the error raised says what happened. Nothing is logged: the error raised is the report
    (the command line prints it as its one line).
    """
    try:
        return await body()
    except BaseException as raw:
        exc = unwrap_error(raw)
        if isinstance(exc, Exception):
            if exc is not writer.failure:
                with anyio.CancelScope(shield=True):
                    await _end_failed(writer, exc, has_world())
            if exc is not raw:
                raise exc from None
        raise
    finally:
        await writer.aclose()


def resumable(exc: Exception) -> bool:
    """Whether ``run --resume`` carries a run that failed with ``exc`` on once its cause is
    mended: a budget raised, a route that answers again, a role fixed in its code or file."""
    return isinstance(exc, BudgetExhausted | ModelError | RoleError)


async def _end_failed(writer: TraceWriter, exc: Exception, world: bool) -> None:
    """Seal the trace with ``run_failed``, unless the trace itself can no longer be written."""
    if writer.failure is not None:  # a write failed inside a task that then failed otherwise
        return
    with contextlib.suppress(TraceError):  # the disk filled up just now: the write's error
        await writer.emit(  # is kept on the writer; the run's own error is the one to report
            "run_failed",
            RunFailedData(
                error=str(exc)[:2000],
                kind=type(exc).__name__,
                resumable=world and resumable(exc),
            ),
            durable=True,
        )
