"""How a run ends when something fails: a sealed ``run_failed``, or, for a cancellation or a
failed write of the trace, nothing at all (the trace stays open-ended, resumable)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import anyio

from worldsim.domain.errors import BudgetExhausted, ModelError, RoleError, TraceError, WorldsimError
from worldsim.domain.logs import get_logger
from worldsim.sim.settlement import RunResult
from worldsim.trace.records import RunFailedData
from worldsim.trace.writer import TraceWriter

__all__ = ["guarded", "resumable", "unwrap_error"]

log = get_logger(__name__)


def unwrap_error(exc: BaseException) -> BaseException:
    """The error a task group's exception group stands for: a worldsim error if there is one."""
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []

        def walk(group: BaseExceptionGroup[BaseException]) -> None:
            for inner in group.exceptions:
                if isinstance(inner, BaseExceptionGroup):
                    walk(inner)
                else:
                    leaves.append(inner)

        walk(exc)
        for leaf in leaves:
            if isinstance(leaf, WorldsimError):
                return leaf
        return leaves[0] if leaves else exc
    return exc


async def guarded(writer: TraceWriter, body: Callable[[], Awaitable[RunResult]]) -> RunResult:
    """Run ``body``; a failure ends the trace with a sealed ``run_failed`` and is re-raised.

    ``body`` should hold the run's engine only while it runs, so that the world it leaves
    behind is let go as soon as the run ends.

    Cancellation (Ctrl-C, a kill) writes nothing: the trace stays open-ended, resumable. So
    does a failed write of the trace (a full disk): like a crash, it ends with no ``run_failed``
    and no ``run_failed`` log line, and the error raised says what happened.
    """
    try:
        return await body()
    except BaseException as raw:
        exc = unwrap_error(raw)
        if isinstance(exc, Exception):
            if exc is not writer.failure:
                log.error("run_failed", error=str(exc), trace=str(writer.path))
                with anyio.CancelScope(shield=True):
                    await _end_failed(writer, exc)
            if exc is not raw:
                raise exc from None
        raise
    finally:
        await writer.aclose()


def resumable(exc: Exception) -> bool:
    """Whether ``run --resume`` carries a run that failed with ``exc`` on once its cause is
    mended: a budget raised, a route that answers again, a role fixed in its code or file."""
    return isinstance(exc, BudgetExhausted | ModelError | RoleError)


async def _end_failed(writer: TraceWriter, exc: Exception) -> None:
    """Seal the trace with ``run_failed``, unless the trace itself can no longer be written."""
    if writer.failure is not None:  # a write failed inside a task that then failed otherwise
        return
    with contextlib.suppress(TraceError):  # the disk filled up just now: the write's error
        await writer.emit(  # is kept on the writer; the run's own error is the one to report
            "run_failed",
            RunFailedData(
                error=str(exc)[:2000],
                kind=type(exc).__name__,
                resumable=resumable(exc),
            ),
            durable=True,
        )
