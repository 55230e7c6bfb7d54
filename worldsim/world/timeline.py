"""Timelines: one simulated future each, with its lineage, path mass and settlement."""

from __future__ import annotations

from dataclasses import dataclass

from worldsim.domain.contracts import EXPECTED, TimelineId, TimelineStatus
from worldsim.world.state import WorldState

__all__ = ["Timeline", "child_id", "settlement_of"]


def child_id(parent: TimelineId, n: int) -> TimelineId:
    """The n-th child (1-based) of ``parent``: ``t0`` → ``t0.1``, ``t0.2``, ..."""
    return f"{parent}.{n}"


@dataclass(slots=True)
class Timeline:
    """A running timeline. Owned by its own task; only that task mutates it."""

    id: TimelineId
    parent: TimelineId | None
    fork_tick: int | None
    depth: int
    mass: float
    slots: int
    state: WorldState
    status: TimelineStatus = "running"
    settlement: str = "unresolved"
    forced_p_yes: float | None = None
    forced_probs: dict[str, float] | None = None
    end_tick: int = -1
    reason: str = ""
    children: int = 0


def settlement_of(
    state: WorldState, status: TimelineStatus, forced_p_yes: float | None, forced: object
) -> str:
    """A finished timeline's settlement: the outcome its ledger realized; else ``expected`` when
    it settled at forced values (see `EXPECTED`); else ``unresolved``."""
    outcome = state.outcome()
    if outcome is not None:
        return outcome
    if status == "settled" and (forced_p_yes is not None or forced is not None):
        return EXPECTED
    return "unresolved"
