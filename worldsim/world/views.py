"""Views: what a role sees when it runs — the card, its place in time, an immutable snapshot.

The engine builds one view per call (the world initializer's, an agent's tick, the reviewer's
tick, the reporter's finished multiverse) and hands it to the role; a prompt role also hands it
to its model beside the rendered prompt, so a model that answers from structure (the offline
model) reads the same snapshot the prompt describes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from worldsim.domain.contracts import TimelineId
from worldsim.world.moves import Proposal, TimelineSummary
from worldsim.world.state import ScheduledEvent, WorldState

if TYPE_CHECKING:
    from worldsim.domain.cards import Card

__all__ = [
    "BuildContext",
    "ForecastContext",
    "InitContext",
    "NewsContext",
    "NewsItem",
    "ReportContext",
    "ReviewContext",
    "RoleView",
    "TickBatch",
    "TickContext",
]


@dataclass(frozen=True, slots=True)
class InitContext:
    card: Card
    ticks: int
    rng: np.random.Generator
    tick_roles: frozenset[str] = frozenset({"actor", "cohort"})
    """The runnable tick roles a built world's actors and cohorts may name."""


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
class TickBatch:
    """What a tick's agents of one role see together: the same snapshot as each one's
    :class:`TickContext`, with agent ``agents[i]``'s generator at ``rngs[i]`` and the run's
    Temporal Gateway (``None`` for a card without evidence), which logs each access under the
    agent that made it. A role that decides its agents at once reads this; any other role gets
    one :class:`TickContext` per agent made from it."""

    card: Card
    timeline: TimelineId
    tick: int
    ticks: int
    date: datetime
    agents: tuple[str, ...]
    state: WorldState
    observations: tuple[ScheduledEvent, ...]
    rngs: Sequence[np.random.Generator]
    gateway: Any = None


@dataclass(frozen=True, slots=True)
class ReviewContext:
    card: Card
    timeline: TimelineId
    tick: int
    ticks: int
    date: datetime
    state: WorldState
    observations: tuple[ScheduledEvent, ...]
    proposals: Sequence[Proposal]
    """The tick's proposals in canonical order: a ``TickProposals`` (columns where a batch
    model decided them) from the engine, or any sequence of proposals."""
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


@dataclass(frozen=True, slots=True)
class ForecastContext:
    """The direct baseline's view: the card alone, no simulated world."""

    card: Card


@dataclass(frozen=True, slots=True)
class NewsItem:
    """One document of a continued run's news: what the assessor reads of it."""

    id: str
    published_at: datetime
    title: str
    text: str
    stance: float | None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class NewsContext:
    """A continued run's assessor's view: one particle (a timeline as it stood at the end of
    the tick before ``tick``) and the news published since the parent's cut-off, which it
    judges document by document."""

    card: Card
    timeline: TimelineId
    tick: int
    date: datetime
    state: WorldState
    news: tuple[NewsItem, ...]
    strength: float


@dataclass(frozen=True, slots=True)
class BuildContext:
    """A benchmark-building role's view: the card it works on (none while questions are being
    made); its prompt's variables hold the rest (the documents, the graph so far, the quality
    gates' feedback)."""

    card: Card | None = None


@dataclass(frozen=True, slots=True)
class RoleView:
    """A prompt role's request as structure: its context and the variables its prompt shows."""

    context: (
        InitContext
        | TickContext
        | TickBatch
        | ReviewContext
        | ReportContext
        | ForecastContext
        | BuildContext
        | NewsContext
    )
    variables: Mapping[str, Any] = field(default_factory=dict)
