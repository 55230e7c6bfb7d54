"""What LLM roles are asked to return: small, bounded pydantic models.

These are the JSON schemas sent as response formats. Every string has a ``max_length`` (so
replies are not cut off at ``max_tokens``) and every number its bounds, because grammar-
constrained decoding does not enforce numeric ranges: values are validated on receipt. Maps are
lists of small objects, so every schema stays usable in strict structured-output mode.

Each schema has one way its result is applied (docs/roles.md): ``ActorOutput`` and
``CohortOutput`` become proposals that the governance reviews, ``GovernanceOutput`` becomes the
tick's review (ledger updates, pressure shifts, fork candidates), ``WorldOutput`` becomes the
initial world, ``ReportOutput`` the grounded report, ``ForecastOutput`` a direct forecast of a
binary card and ``ChoiceForecastOutput`` one of a multiple-choice card. The benchmark builder's
roles (phase ``build``) return ``HindsightOutput`` (a causal explanation) and
``GraphEditsOutput`` (edits of a hindsight graph), ``QuestionsOutput`` (proposed questions)
and ``QuestionReviewOutput`` (a proposed question's quality scores). A continued run's
assessor (phase ``news``) returns ``AssessmentOutput``: how likely each piece of news is under
what one timeline holds.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

from worldsim.domain import bounds
from worldsim.domain.values import FrozenModel

__all__ = [
    "INIT_ACTORS",
    "OUTPUTS",
    "PHASE_OUTPUTS",
    "TEMPLATE_NAMES",
    "ActorMove",
    "ActorOutput",
    "AssessmentOutput",
    "BranchIdea",
    "ChoiceForecastOutput",
    "CohortAction",
    "CohortOutput",
    "Direction",
    "EndpointProbability",
    "ForecastOutput",
    "GovernanceOutput",
    "GraphEdit",
    "GraphEditsOutput",
    "HindsightOutput",
    "InitActor",
    "InitCohort",
    "InitEvent",
    "InitHypothesis",
    "InitRelation",
    "InitVariable",
    "LedgerMove",
    "NewsLikelihood",
    "PressureShift",
    "QuestionProposal",
    "QuestionReviewOutput",
    "QuestionsOutput",
    "RejectedMove",
    "Relation",
    "ReportClaim",
    "ReportOutput",
    "ReportRef",
    "WorldOutput",
]


class ActorMove(FrozenModel):
    kind: Literal["statement", "action", "signal"] = "action"
    endpoint: str = Field(max_length=80, description="id of the endpoint this move pushes")
    direction: float = Field(ge=-1.0, le=1.0, description="+1 toward the endpoint, -1 against")
    magnitude: float = Field(ge=0.0, le=1.0, description="how strong the move is")
    summary: str = Field(max_length=300, description="what the actor does, one sentence")
    cites: list[str] = Field(
        default_factory=list,
        max_length=5,
        description="ids of evidence documents this move relies on",
    )


class ActorOutput(FrozenModel):
    proposals: list[ActorMove] = Field(max_length=3)


class CohortAction(FrozenModel):
    label: str = Field(max_length=60, description="short name of the archetypal action")
    endpoint: str = Field(max_length=80)
    direction: float = Field(ge=-1.0, le=1.0)
    magnitude: float = Field(ge=0.0, le=1.0)
    probability: float = Field(ge=0.0, le=1.0, description="share of members taking it")


class CohortOutput(FrozenModel):
    actions: list[CohortAction] = Field(min_length=1, max_length=5)
    attention: float = Field(ge=0.0, le=1.0)
    trust: float = Field(ge=0.0, le=1.0)


class RejectedMove(FrozenModel):
    proposal: str = Field(max_length=100, description="'agent#index'")
    reason: str = Field(max_length=200)


class PressureShift(FrozenModel):
    endpoint: str = Field(max_length=80)
    by: float = Field(ge=-50.0, le=50.0, description="change of the endpoint's pressure (logit)")


class EndpointProbability(FrozenModel):
    endpoint: str = Field(max_length=80)
    p: float = Field(ge=0.0, le=1.0)


class LedgerMove(FrozenModel):
    endpoint: str = Field(max_length=80)
    status: Literal["realized", "eliminated"] | None = None
    evidence: Literal["supports", "contradicts"] | None = None
    ref: str = Field("", max_length=120, description="'agent#index' or a document id")
    note: str = Field("", max_length=200)


class BranchIdea(FrozenModel):
    hypothesis: str = Field(max_length=200)
    hypothesis_id: str | None = Field(None, max_length=80, description="id of a world hypothesis")
    endpoint_id: str = Field(max_length=80)
    probability: float = Field(gt=0.0, lt=1.0)
    score: float = Field(ge=0.0, le=1.0, description="how much it deserves its own timeline")
    impact: float = Field(
        ge=-bounds.MAX_PRESSURE,
        le=bounds.MAX_PRESSURE,
        description="pressure shift if it comes true",
    )


class GovernanceOutput(FrozenModel):
    accepted: list[str] = Field(
        default_factory=list, max_length=50_000, description="'agent#index' of accepted proposals"
    )
    rejected: list[RejectedMove] = Field(default_factory=list, max_length=50_000)
    pressure: list[PressureShift] = Field(default_factory=list, max_length=100)
    ledger: list[LedgerMove] = Field(default_factory=list, max_length=50_000)
    decision: Literal["continue", "terminate", "fork"] = "continue"
    reason: str = Field("", max_length=400)
    branches: list[BranchIdea] = Field(default_factory=list, max_length=100)
    forced_p_yes: float | None = Field(
        None, ge=0.0, le=1.0, description="on the last tick, if unresolved"
    )
    forced_probs: list[EndpointProbability] | None = Field(
        None, max_length=100, description="multiple choice: on the last tick, if unresolved"
    )


class InitActor(FrozenModel):
    id: str = Field(max_length=80)
    name: str = Field(max_length=80)
    kind: Literal["individual", "institution"] = "institution"
    role: str = Field("actor", max_length=80, description="the tick role that drives it")
    favours: str | None = Field(None, max_length=80, description="multiple choice: its endpoint")
    stance: float = Field(ge=-1.0, le=1.0)
    influence: float = Field(ge=0.0, le=1.0)
    activity: float = Field(ge=0.0, le=1.0)


INIT_ACTORS: TypeAdapter[list[InitActor]] = TypeAdapter(list[InitActor])
"""Many ``InitActor`` validated, or dumped, in one call (a world of 10⁴ actors)."""


class InitCohort(FrozenModel):
    id: str = Field(max_length=80)
    name: str = Field(max_length=80)
    role: str = Field("cohort", max_length=80, description="the tick role that drives it")
    size: int = Field(ge=1, le=10_000_000_000)
    attention: float = Field(ge=0.0, le=1.0)
    trust: float = Field(ge=0.0, le=1.0)
    sentiment: float = Field(ge=-1.0, le=1.0)


class InitRelation(FrozenModel):
    source: str = Field(max_length=80)
    target: str = Field(max_length=80)
    weight: float = Field(ge=0.0, le=1.0)


class InitEvent(FrozenModel):
    id: str = Field(max_length=80)
    title: str = Field(max_length=200)
    date: str = Field(max_length=30, description="ISO date within [as_of, deadline)")
    description: str = Field("", max_length=1000)
    pressure: float = Field(0.0, ge=-50.0, le=50.0, description="shift toward yes")
    shifts: list[PressureShift] = Field(
        default_factory=list, max_length=20, description="multiple choice: shifts per endpoint"
    )


class InitHypothesis(FrozenModel):
    id: str = Field(max_length=80)
    title: str = Field(max_length=200)
    endpoint: str = Field(max_length=80)
    start: str | None = Field(None, max_length=30, description="ISO date the window opens")
    end: str | None = Field(None, max_length=30, description="ISO date the window closes")
    probability: float = Field(gt=0.0, lt=1.0)
    impact: float = Field(ge=-bounds.MAX_PRESSURE, le=bounds.MAX_PRESSURE)


class InitVariable(FrozenModel):
    name: str = Field(max_length=80)
    value: bool | float | str


class WorldOutput(FrozenModel):
    base_rate: float = Field(gt=0.0, lt=1.0, description="prior probability of yes")
    base_rates: list[EndpointProbability] | None = Field(
        None, max_length=100, description="multiple choice: prior per scored endpoint"
    )
    hazard: float = Field(ge=0.0, le=1.0, description="per-tick chance the question resolves")
    actors: list[InitActor] = Field(min_length=1, max_length=bounds.MAX_ACTORS)
    cohorts: list[InitCohort] = Field(default_factory=list, max_length=100_000)
    relations: list[InitRelation] = Field(default_factory=list, max_length=1_000_000)
    events: list[InitEvent] = Field(default_factory=list, max_length=1_000)
    hypotheses: list[InitHypothesis] = Field(default_factory=list, max_length=1_000)
    variables: list[InitVariable] = Field(default_factory=list, max_length=100)
    constraints: list[str] = Field(default_factory=list, max_length=100)


class ReportRef(FrozenModel):
    timeline: str | None = Field(None, max_length=40)
    tick: int | None = Field(None, ge=0)
    agent: str | None = Field(None, max_length=80)
    document: str | None = Field(None, max_length=120)
    ledger: str | None = Field(None, max_length=80)


class ReportClaim(FrozenModel):
    text: str = Field(max_length=500)
    refs: list[ReportRef] = Field(max_length=6)


class ReportOutput(FrozenModel):
    summary: str = Field(max_length=1500)
    claims: list[ReportClaim] = Field(max_length=12)


# what a forecast gives beside its probabilities, whichever its kind
_Rationale = Annotated[str, Field(max_length=1500)]
_Points = Annotated[list[str], Field(default_factory=list, max_length=8)]
_LeakageWarning = Annotated[
    bool, Field(description="true if you recognise this scenario or know its outcome")
]


class ForecastOutput(FrozenModel):
    p_yes: float = Field(ge=0.0, le=1.0)
    rationale: _Rationale
    drivers: _Points
    uncertainties: _Points
    leakage_warning: _LeakageWarning


class ChoiceForecastOutput(FrozenModel):
    probabilities: list[EndpointProbability] = Field(
        min_length=2, max_length=40, description="one probability per outcome id, summing to 1"
    )
    rationale: _Rationale
    drivers: _Points
    uncertainties: _Points
    leakage_warning: _LeakageWarning


class HindsightOutput(FrozenModel):
    """The hindsight role's causal explanation of how the question resolved."""

    explanation: str = Field(max_length=4000)
    sources: list[str] = Field(
        default_factory=list, max_length=60, description="ids of the documents relied on"
    )


Relation = Literal[
    "causes", "enables", "prevents", "inhibits", "amplifies", "triggers", "correlates"
]
Direction = Literal["positive", "negative", "neutral", "mixed"]


class GraphEdit(FrozenModel):
    """One edit of a hindsight graph: ``propose_event`` (id, title, date, description,
    source_ids), ``add_edge`` (source, target, relation, strength, confidence),
    ``record_impact`` (event, direction, magnitude, confidence), ``delete_event`` (id) or
    ``delete_edge`` (source, target). Fields another op uses are ignored."""

    op: Literal["propose_event", "add_edge", "record_impact", "delete_event", "delete_edge"]
    id: str = Field("", max_length=80)
    title: str = Field("", max_length=300)
    date: str = Field("", max_length=40, description="ISO date of the event")
    description: str = Field("", max_length=1000)
    source_ids: list[str] = Field(default_factory=list, max_length=20)
    source: str = Field("", max_length=80)
    target: str = Field("", max_length=80)
    relation: Relation = "causes"
    strength: float = Field(0.5, ge=0.0, le=1.0)
    confidence: float = Field(0.5, ge=0.0, le=1.0)
    event: str = Field("", max_length=80)
    direction: Direction = "neutral"
    magnitude: float = Field(0.0, ge=0.0, le=1.0)


class GraphEditsOutput(FrozenModel):
    """The graph builder's edits of the working graph, applied in order."""

    edits: list[GraphEdit] = Field(default_factory=list, max_length=120)
    note: str = Field("", max_length=1000)


class QuestionProposal(FrozenModel):
    """A forecasting question the question generator proposes from a cluster of articles."""

    question: str = Field(max_length=400)
    kind: Literal["binary", "multiple_choice"] = "binary"
    outcomes: list[str] = Field(
        default_factory=list, max_length=12, description="for multiple choice: the options"
    )
    domain: str = Field("", max_length=80)
    resolution_criteria: str = Field("", max_length=1000)
    opens: str = Field(max_length=40, description="ISO date: the earliest forecastable date")
    deadline: str = Field(max_length=40, description="ISO date by which it resolves")
    provenance: list[str] = Field(
        default_factory=list, max_length=20, description="ids of the articles it comes from"
    )


class QuestionsOutput(FrozenModel):
    """The question generator's proposals for one cluster of articles."""

    questions: list[QuestionProposal] = Field(default_factory=list, max_length=10)


class QuestionReviewOutput(FrozenModel):
    """The quality role's scores of one proposed question, each in [0, 1], and its flags."""

    clarity: float = Field(ge=0.0, le=1.0)
    measurability: float = Field(ge=0.0, le=1.0)
    answerability: float = Field(ge=0.0, le=1.0)
    answer_in_question: bool = Field(description="true if the question gives its answer away")
    resolved_at_opens: bool = Field(
        description="true if the articles up to opens already say how it resolves"
    )
    notes: str = Field("", max_length=600)


class NewsLikelihood(FrozenModel):
    doc_id: str = Field(max_length=bounds.MAX_NAME_CHARS)
    likelihood: float = Field(
        ge=0.0, le=1.0, description="how likely this document is, were this timeline the true one"
    )
    reason: str = Field("", max_length=600)
    cites: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="what in the timeline the judgement rests on: endpoint ids, event ids, "
        "hypothesis ids",
    )


class AssessmentOutput(FrozenModel):
    likelihoods: list[NewsLikelihood] = Field(
        max_length=bounds.MAX_NEWS, description="one entry per document of news, by its id"
    )


OUTPUTS: dict[str, type[BaseModel]] = {
    "ActorOutput": ActorOutput,
    "AssessmentOutput": AssessmentOutput,
    "CohortOutput": CohortOutput,
    "GovernanceOutput": GovernanceOutput,
    "WorldOutput": WorldOutput,
    "ReportOutput": ReportOutput,
    "ForecastOutput": ForecastOutput,
    "ChoiceForecastOutput": ChoiceForecastOutput,
    "HindsightOutput": HindsightOutput,
    "GraphEditsOutput": GraphEditsOutput,
    "QuestionsOutput": QuestionsOutput,
    "QuestionReviewOutput": QuestionReviewOutput,
}
"""The documented output schemas a prompt role may name in its ``output:`` field."""

PHASE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "init": ("WorldOutput",),
    "tick": ("ActorOutput", "CohortOutput"),
    "review": ("GovernanceOutput",),
    "report": ("ReportOutput",),
    "direct": ("ForecastOutput", "ChoiceForecastOutput"),
    "build": ("HindsightOutput", "GraphEditsOutput", "QuestionsOutput", "QuestionReviewOutput"),
    "news": ("AssessmentOutput",),
}
"""Which outputs each phase can apply."""

_TICK_VIEW = ("card", "tick", "ticks", "timeline", "date", "endpoints", "observations")

TEMPLATE_NAMES: dict[str, frozenset[str]] = {
    "ActorOutput": frozenset({*_TICK_VIEW, "actor", "evidence"}),
    "CohortOutput": frozenset({*_TICK_VIEW, "cohort"}),
    "GovernanceOutput": frozenset({*_TICK_VIEW, "mass", "is_last_tick", "hypotheses", "proposals"}),
    "WorldOutput": frozenset({"card", "ticks"}),
    "ReportOutput": frozenset({"card", "p_yes", "timelines", "forks"}),
    "AssessmentOutput": frozenset(
        {"card", "date", "tick", "timeline", "endpoints", "forks", "events", "news"}
    ),
}
"""The names a prompt template of each simulation output (and the news assessor's) sees
(docs/roles.md). These templates are rendered only when a model reads the prompt, never on the
offline route, so a name outside them is refused when the file is read rather than on a paid
run's first call."""
