"""Moves: what roles hand the engine — proposals, reviews, branch candidates, reports.

These frozen values are the contract between the roles that decide and the world that changes:
an actor or cohort proposes, the governance reviewer accepts or rejects, moves pressure and the
ledger and suggests forks, the reporter writes claims that point into the trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from worldsim.domain.contracts import TimelineId
from worldsim.world.state import Delta, LedgerUpdate

__all__ = [
    "PROPOSALS",
    "BranchCandidate",
    "Claim",
    "ClaimRef",
    "Proposal",
    "ProposalRef",
    "Proposers",
    "RejectedProposal",
    "Report",
    "Review",
    "TimelineSummary",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Proposal(_Out):
    """What an actor or cohort wants to happen this tick; the reviewer decides."""

    agent: str = Field(max_length=80)
    index: int = Field(0, ge=0)
    kind: Literal["statement", "action", "cohort_update", "signal"] = "action"
    endpoint: str | None = Field(None, max_length=80)
    direction: float = Field(0.0, ge=-1.0, le=1.0, description="toward the endpoint (+) or away")
    magnitude: float = Field(0.0, ge=0.0, le=1.0)
    summary: str = Field("", max_length=500)
    deltas: tuple[Delta, ...] = ()
    cites: tuple[str, ...] = ()


PROPOSALS: TypeAdapter[list[Proposal]] = TypeAdapter(list[Proposal])
"""Many proposals validated, or dumped, in one call: about half the cost of one at a time."""


class ProposalRef(_Out):
    agent: str
    index: int


class RejectedProposal(_Out):
    agent: str
    index: int
    reason: str = Field(max_length=300)


class BranchCandidate(_Out):
    """A fork the reviewer suggests: with ``probability`` the hypothesis comes true."""

    hypothesis: str = Field(max_length=300)
    hypothesis_id: str | None = Field(None, max_length=80)
    endpoint_id: str = Field(max_length=80)
    probability: float = Field(gt=0.0, lt=1.0)
    score: float = Field(ge=0.0, le=1.0)
    if_true: tuple[Delta, ...] = ()
    if_false: tuple[Delta, ...] = ()


class Review(_Out):
    """The governance reviewer's verdict on one tick of one timeline."""

    accepted: tuple[ProposalRef, ...] = ()
    rejected: tuple[RejectedProposal, ...] = ()
    deltas: tuple[Delta, ...] = ()
    ledger: tuple[LedgerUpdate, ...] = ()
    decision: Literal["continue", "terminate", "fork"] = "continue"
    reason: str = Field("", max_length=500)
    branches: tuple[BranchCandidate, ...] = ()
    forced_p_yes: float | None = Field(None, ge=0.0, le=1.0)
    forced_probs: dict[str, float] | None = None


class ClaimRef(_Out):
    """A pointer from a report claim into the trace."""

    timeline: str | None = None
    tick: int | None = None
    agent: str | None = None
    document: str | None = None
    ledger: str | None = Field(None, description="an endpoint id whose ledger entry is cited")


class Claim(_Out):
    text: str = Field(max_length=1000)
    refs: tuple[ClaimRef, ...] = ()


class Report(_Out):
    summary: str = Field("", max_length=2000)
    claims: tuple[Claim, ...] = ()


@dataclass(frozen=True, slots=True)
class TimelineSummary:
    id: TimelineId
    parent: TimelineId | None
    fork_tick: int | None
    mass: float
    status: str
    settlement: str
    end_tick: int
    forced_p_yes: float | None


class Proposers(AbstractSet[tuple[str, int, str]]):
    """Who proposed in a run: ``(timeline, tick, agent)`` for each proposal's author, as a set
    of agents per timeline and tick (a tick of 10⁵ agents adds no object per agent, which the
    collector would walk again for the rest of the run)."""

    def __init__(self, seen: Iterable[tuple[str, int, str]] = ()) -> None:
        self._by_tick: dict[tuple[str, int], set[str]] = {}
        self.update(seen)

    def add_tick(self, timeline: str, tick: int, agents: Iterable[str]) -> None:
        """The authors of a timeline's tick's proposals."""
        self._by_tick.setdefault((timeline, tick), set()).update(agents)

    def update(self, seen: Iterable[tuple[str, int, str]]) -> None:
        for timeline, tick, agent in seen:
            self.add_tick(timeline, tick, (agent,))

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, tuple) or len(item) != 3:
            return False
        timeline, tick, agent = item
        return agent in self._by_tick.get((timeline, tick), ())

    def __iter__(self) -> Iterator[tuple[str, int, str]]:
        for (timeline, tick), agents in self._by_tick.items():
            for agent in agents:
                yield timeline, tick, agent

    def __len__(self) -> int:
        return sum(map(len, self._by_tick.values()))
