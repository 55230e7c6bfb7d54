"""The role contract: what a Python role implements, and how the registry builds it.

A role runs in one phase: ``init`` builds the world, ``tick`` roles (actors, cohorts and any
added role) propose, ``review`` (the governance reviewer) turns proposals into state changes
and fork candidates, ``report`` writes grounded claims. A Python role is a class with the
phase's method; the registry builds it with :data:`RoleFactory`'s keywords — ``model`` (the
:class:`~worldsim.domain.contracts.Model` its route resolves to: the offline model, an
OpenAI-compatible server, a test double) and ``seed`` (the run's seed) — passing only the ones
its constructor names, so a class that needs neither takes no arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from worldsim.domain.contracts import Phase
from worldsim.world.columns import TickReview
from worldsim.world.moves import Proposal, Report, Review
from worldsim.world.state import WorldState
from worldsim.world.views import InitContext, ReportContext, ReviewContext, TickContext

__all__ = [
    "AgentRole",
    "InitRole",
    "ReportRole",
    "ReviewRole",
    "Role",
    "RoleFactory",
]


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
    async def review(self, ctx: ReviewContext) -> Review | TickReview: ...


@runtime_checkable
class ReportRole(Role, Protocol):
    async def report(self, ctx: ReportContext) -> Report: ...


RoleFactory = Callable[..., Any]
"""A role class or function, called with ``model=`` and/or ``seed=`` as its signature asks."""
