"""The deltas that change a world state (DESIGN §2.3), and a reviewer's ledger updates.

Deltas are pydantic models because they cross boundaries: reviewers produce them, the trace
records them, replay applies them again through the same code
(:func:`~worldsim.world.state.apply_deltas`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from worldsim.domain.values import FrozenModel


class SetPressure(FrozenModel):
    """Set a scored endpoint's pressure (a logit; probabilities are its softmax)."""

    op: Literal["set_pressure"] = "set_pressure"
    endpoint: str = Field(max_length=80)
    value: float = Field(ge=-50.0, le=50.0)


class ShiftPressure(FrozenModel):
    """Add to a scored endpoint's pressure."""

    op: Literal["shift_pressure"] = "shift_pressure"
    endpoint: str = Field(max_length=80)
    by: float = Field(ge=-50.0, le=50.0)


class SetActor(FrozenModel):
    op: Literal["set_actor"] = "set_actor"
    id: str = Field(max_length=80)
    field: Literal["stance", "influence", "activity"]
    value: float


class SetCohort(FrozenModel):
    op: Literal["set_cohort"] = "set_cohort"
    id: str = Field(max_length=80)
    attention: float = Field(ge=0.0, le=1.0)
    trust: float = Field(ge=0.0, le=1.0)
    sentiment: float = Field(ge=-1.0, le=1.0)


class MemberAction(FrozenModel):
    """One action of a cohort's archetype: where it pulls a member, how hard, how likely."""

    direction: float = Field(ge=-1.0, le=1.0)
    magnitude: float = Field(ge=0.0, le=1.0)
    probability: float = Field(ge=0.0, le=1.0)


class UpdateMembers(FrozenModel):
    """A cohort archetype's decision, applied to every member of the cohort
    (:func:`worldsim.world.members.update`); the cohort's row becomes the members' means."""

    op: Literal["update_members"] = "update_members"
    id: str = Field(max_length=80)
    actions: tuple[MemberAction, ...] = Field(min_length=1, max_length=32)
    attention: float = Field(ge=0.0, le=1.0)
    trust: float = Field(ge=0.0, le=1.0)
    draw: int = Field(ge=0, lt=2**63, description="seed of the members' picks")


class SetVariable(FrozenModel):
    op: Literal["set_variable"] = "set_variable"
    name: str = Field(min_length=1, max_length=120)
    value: float | int | str | bool


class SetHypothesis(FrozenModel):
    op: Literal["set_hypothesis"] = "set_hypothesis"
    id: str = Field(max_length=80)
    status: Literal["open", "fired"]


Delta = Annotated[
    SetPressure
    | ShiftPressure
    | SetActor
    | SetCohort
    | UpdateMembers
    | SetVariable
    | SetHypothesis,
    Field(discriminator="op"),
]


class EvidenceIn(FrozenModel):
    kind: Literal["supports", "contradicts"]
    ref: str = Field(max_length=200)
    note: str = Field("", max_length=500)


class LedgerUpdate(FrozenModel):
    """A reviewer's change to one endpoint: a status move, an evidence entry, or both."""

    endpoint: str = Field(max_length=80)
    status: Literal["realized", "eliminated"] | None = None
    evidence: EvidenceIn | None = None
