"""The one exception hierarchy of worldsim.

    WorldsimError
    ├── ConfigError            what the user must fix (exit code 2)
    │   ├── CardError          a card, label or other input file is invalid
    │   ├── PolicyError        a branch policy is unknown or invalid
    │   └── RoleError          a role is unknown, duplicated or malformed
    └── WorldsimRuntimeError   what went wrong while running (exit code 1)
        ├── ModelError         a model call failed for good
        │   ├── ReplayMissError  strict replay found no cached reply for a call
        │   └── RouteFailed      a route gave no usable reply after its retries
        ├── BudgetExhausted    the run reached its cost budget
        │   └── ProviderAnomaly  a provider reported usage no call of it could cost
        ├── LeakageError       a prompt or reply held a forbidden string (fail mode)
        ├── StateError         a state delta or ledger move is invalid
        ├── NewsLeavesNoPath   a continued run's news leaves no timeline with mass
        ├── TraceError         a trace is corrupt or inconsistent (what ``verify`` refuses)
        │   └── TraceIncomplete  a sound trace that holds no result: cut off, or failed (exit 3)
        └── GatewayRefusal     the Temporal Gateway refused a document (at/after cutoff, unknown)

Every error carries the file, field, timeline and tick it concerns, where known, and renders
them into a one-line message.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack

__all__ = [
    "BudgetExhausted",
    "CardError",
    "ConfigError",
    "GatewayRefusal",
    "LeakageError",
    "ModelError",
    "NewsLeavesNoPath",
    "PolicyError",
    "ProviderAnomaly",
    "ReplayMissError",
    "RoleError",
    "RouteFailed",
    "StateError",
    "TraceError",
    "TraceIncomplete",
    "Where",
    "WorldsimError",
    "WorldsimRuntimeError",
    "unwrap_error",
]


class Where(TypedDict, total=False):
    """What an error concerns, each where known: the keywords every worldsim error takes."""

    file: str | Path | None
    field: str | None
    timeline: str | None
    tick: int | None
    line: int | None


class WorldsimError(Exception):
    """Root of every error worldsim raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, **where: Unpack[Where]) -> None:
        super().__init__(message)
        self.message = message
        file = where.get("file")
        self.file = str(file) if file is not None else None
        self.field = where.get("field")
        self.timeline = where.get("timeline")
        self.tick = where.get("tick")
        self.line = where.get("line")

    def __str__(self) -> str:
        where: list[str] = []
        if self.file is not None:
            where.append(self.file if self.line is None else f"{self.file}:{self.line}")
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        if self.timeline is not None:
            where.append(f"timeline {self.timeline}")
        if self.tick is not None:
            where.append(f"tick {self.tick}")
        return _one_line(": ".join([*where, self.message]))


def _one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``, ``\\x85``):
    an error is one line even when it quotes a key or value from a hostile file."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


class ConfigError(WorldsimError):
    """Something the user must fix before anything runs."""

    exit_code = 2


class CardError(ConfigError):
    """A card, label or other input file is invalid."""


class PolicyError(ConfigError):
    """A branch policy is unknown or invalid."""


class RoleError(ConfigError):
    """A role is unknown, registered twice or malformed."""


class WorldsimRuntimeError(WorldsimError):
    """Something went wrong while running."""


class _WithCall(WorldsimRuntimeError):
    """A runtime error about a model call: ``call`` holds its ``llm_call`` record, or is empty."""

    def __init__(
        self, message: str, *, call: Mapping[str, Any] | None = None, **where: Unpack[Where]
    ) -> None:
        super().__init__(message, **where)
        self.call: dict[str, Any] = dict(call) if call is not None else {}


class ModelError(_WithCall):
    """A model call failed after its retries.

    ``call`` holds the ``llm_call`` record of the failed call (attempts, retried errors, usage,
    the last reply), so the engine can trace the failure; it never holds a key.

    ``ends_run`` says what the engine does with it: a failure that is the reply's (it stayed
    invalid after its repair) is part of the simulation (the agent sits the tick out, the
    reviewer's timeline ends, ...); one that ``ends_run`` stops the run at once.
    """

    ends_run = False


class ReplayMissError(ModelError):
    """Strict replay asked the response cache for a call it does not hold."""

    ends_run = True


class RouteFailed(ModelError):
    """A route gave no usable reply after its retries: it could not be reached, timed out,
    refused the request (a bad key, an unknown model, a format it cannot serve) or ran out of
    attempts or time. A run goes no further without it: a forecast made from the calls that
    did answer is not the method's forecast. The run ends resumable; the call is asked again."""

    ends_run = True


class BudgetExhausted(_WithCall):
    """The run reached its cost budget; its trace is marked incomplete and resumable.

    ``call`` holds the ``llm_call`` record of a call the budget stopped part-way (a repair or
    tool round trip that could not be reserved after paid ones), so what it cost is traced;
    it is empty when the refused call sent nothing.
    """


class ProviderAnomaly(BudgetExhausted):
    """A provider reported usage that costs more than its request could: more than the call's
    reservation. The cap bounds what worldsim sends; it cannot bound what a provider bills, so
    the run stops (resumable) and no later call on that route is sent under the same budget.

    ``call`` holds the ``llm_call`` record of the call whose reply reported it (its
    ``anomaly`` field: the reported usage and cost beside the reservation it was charged); it is
    empty for a call refused because another call on its route already reported one.
    """


class LeakageError(WorldsimRuntimeError):
    """A prompt or reply contained a forbidden string while the leakage guard was in fail mode.

    The message names where (prompt or reply) and the string's SHA-256, never the string itself.
    """


class NewsLeavesNoPath(WorldsimRuntimeError):
    """A continued run's news has likelihood 0 under every particle, or prunes them all."""


class StateError(WorldsimRuntimeError):
    """A state delta or ledger update cannot be applied."""


class TraceError(WorldsimRuntimeError):
    """A trace is corrupt, inconsistent or unreadable."""


class TraceIncomplete(TraceError):
    """A sound trace that holds no result: cut off (a torn line, no terminal record, or no
    complete record at all) or ended by ``run_failed``; exit 3, as ``verify`` says of it."""

    exit_code = 3


class GatewayRefusal(WorldsimRuntimeError):
    """The Temporal Gateway refused to open a document: unknown, or dated at or after its cutoff.

    ``doc_id`` names the document. The gateway refuses both alike (``reason`` ``"unknown"``), so
    that a refusal never reveals a later document; its access log tells them apart.
    """

    def __init__(
        self,
        message: str,
        *,
        doc_id: str,
        reason: str,
        timeline: str | None = None,
        tick: int | None = None,
    ) -> None:
        super().__init__(message, timeline=timeline, tick=tick)
        self.doc_id = doc_id
        self.reason = reason


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
