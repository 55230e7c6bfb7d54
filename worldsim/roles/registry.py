"""Roles: the kinds of agent, their protocol, their outputs, and the registry that finds them.

A role runs in one phase: ``init`` builds the world, ``tick`` roles (actors, cohorts) propose,
``review`` (the governance reviewer) turns proposals into state changes and fork candidates,
``report`` writes grounded claims. Roles are registered with :func:`register_role` or under the
entry-point group ``worldsim.roles``; ``worldsim roles`` lists what is installed.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from worldsim.domain.contracts import Phase, TimelineId
from worldsim.domain.errors import RoleError
from worldsim.world.moves import (
    BranchCandidate,
    Claim,
    ClaimRef,
    Proposal,
    ProposalRef,
    RejectedProposal,
    Report,
    Review,
    TimelineSummary,
)
from worldsim.world.state import ScheduledEvent, WorldState

if TYPE_CHECKING:
    from worldsim.domain.cards import Card

__all__ = [
    "AgentRole",
    "BranchCandidate",
    "Claim",
    "ClaimRef",
    "InitContext",
    "InitRole",
    "Proposal",
    "ProposalRef",
    "RegisteredRole",
    "RejectedProposal",
    "Report",
    "ReportContext",
    "ReportRole",
    "Review",
    "ReviewContext",
    "ReviewRole",
    "Role",
    "TickContext",
    "TimelineSummary",
    "get_role",
    "register_role",
    "registered_roles",
]


# ----------------------------------------------------------------------------- contexts


@dataclass(frozen=True, slots=True)
class InitContext:
    card: Card
    ticks: int
    rng: np.random.Generator


@dataclass(frozen=True, slots=True)
class TickContext:
    """What an agent sees: an immutable snapshot of its timeline at the start of the tick."""

    card: Card
    timeline: TimelineId
    tick: int
    ticks: int
    date: datetime
    agent: str
    state: WorldState
    observations: tuple[ScheduledEvent, ...]
    rng: np.random.Generator
    tools: Any = None


@dataclass(frozen=True, slots=True)
class ReviewContext:
    card: Card
    timeline: TimelineId
    tick: int
    ticks: int
    date: datetime
    state: WorldState
    observations: tuple[ScheduledEvent, ...]
    proposals: tuple[Proposal, ...]
    rng: np.random.Generator
    mass: float
    depth: int

    @property
    def is_last_tick(self) -> bool:
        return self.tick == self.ticks - 1


@dataclass(frozen=True, slots=True)
class ReportContext:
    card: Card
    timelines: tuple[TimelineSummary, ...]
    p_yes: float | None
    rng: np.random.Generator
    forks: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)


# ----------------------------------------------------------------------------- protocols


@runtime_checkable
class Role(Protocol):
    """Every role names itself and the phase it runs in."""

    name: str
    phase: Phase


@runtime_checkable
class InitRole(Role, Protocol):
    async def initialize(self, ctx: InitContext) -> WorldState: ...


@runtime_checkable
class AgentRole(Role, Protocol):
    async def act(self, ctx: TickContext) -> Sequence[Proposal]: ...


@runtime_checkable
class ReviewRole(Role, Protocol):
    async def review(self, ctx: ReviewContext) -> Review: ...


@runtime_checkable
class ReportRole(Role, Protocol):
    async def report(self, ctx: ReportContext) -> Report: ...


_METHOD_FOR_PHASE: dict[str, str] = {
    "init": "initialize",
    "tick": "act",
    "review": "review",
    "report": "report",
}


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True, slots=True)
class RegisteredRole:
    name: str
    phase: Phase
    factory: Callable[[], Role]
    source: str
    description: str


_REGISTRY: dict[str, RegisteredRole] = {}
_ENTRY_POINTS_LOADED = False

R = TypeVar("R")


def register_role(
    name: str, *, phase: Phase, replace: bool = False
) -> Callable[[type[R]], type[R]]:
    """Class decorator that registers a role under ``name``; returns the class unchanged."""

    def decorate(cls: type[R]) -> type[R]:
        method = _METHOD_FOR_PHASE[phase]
        if not callable(getattr(cls, method, None)):
            raise RoleError(f"role '{name}' ({phase}) must define async '{method}'")
        if name in _REGISTRY and not replace and _REGISTRY[name].factory is not cls:
            raise RoleError(f"role '{name}' is already registered by {_REGISTRY[name].source}")
        doc = (cls.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = RegisteredRole(
            name=name,
            phase=phase,
            factory=cls,  # type: ignore[arg-type]
            source=f"{cls.__module__}.{cls.__qualname__}",
            description=doc[0] if doc else "",
        )
        cls.name = name  # type: ignore[attr-defined]
        cls.phase = phase  # type: ignore[attr-defined]
        return cls

    return decorate


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for ep in importlib.metadata.entry_points(group="worldsim.roles"):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plug-in must not take the CLI down
            raise RoleError(f"cannot load role plug-in '{ep.name}' ({ep.value}): {exc}") from None
        if ep.name not in _REGISTRY:
            phase = getattr(obj, "phase", None)
            if phase not in _METHOD_FOR_PHASE:
                raise RoleError(f"role plug-in '{ep.name}' ({ep.value}) has no valid 'phase'")
            register_role(ep.name, phase=phase)(obj)


def _load_builtins() -> None:
    import worldsim.offline  # noqa: F401  (registers the offline roles)


def registered_roles() -> dict[str, RegisteredRole]:
    """Every role known: built-in, decorated in imported code, or from entry points."""
    _load_builtins()
    _load_entry_points()
    return dict(sorted(_REGISTRY.items()))


def get_role(name: str, phase: Phase | None = None) -> Role:
    """Instantiate the role registered as ``name``; check its phase when given."""
    roles = registered_roles()
    entry = roles.get(name)
    if entry is None:
        known = ", ".join(roles) or "none"
        raise RoleError(f"unknown role '{name}' (known: {known})", field="role")
    if phase is not None and entry.phase != phase:
        raise RoleError(f"role '{name}' runs in phase '{entry.phase}', not '{phase}'")
    return entry.factory()
