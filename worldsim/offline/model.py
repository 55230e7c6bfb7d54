"""The offline model: the embedded agent-based model behind the ``offline`` route.

It answers the same structured requests as an OpenAI-compatible server, through the same
:class:`~worldsim.domain.contracts.Model` protocol, but from the request's structured view
instead of its prompt (which it never renders). It dispatches on the requested output schema,
so any prompt role whose ``output`` is a documented schema runs on it — a project's
``agents/market-maker.md`` with ``output: ActorOutput`` acts like an offline actor. Every draw
comes from the generator the engine keyed for the call (seed, purpose, timeline, tick, agent),
so answers are reproducible and independent of scheduling. Its answers cost nothing and are not
recorded as ``llm_call`` records: the seed reproduces them. The rules are docs/offline-model.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from worldsim.domain.cards import ACTOR_SEEDS, Card, Seeds
from worldsim.domain.contracts import BatchRequest, BatchResponse, ModelRequest, ModelResponse
from worldsim.domain.errors import ConfigError
from worldsim.domain.outputs import (
    INIT_ACTORS,
    ActorMove,
    ActorOutput,
    AssessmentOutput,
    ChoiceForecastOutput,
    CohortAction,
    CohortOutput,
    EndpointProbability,
    ForecastOutput,
    GovernanceOutput,
    GraphEditsOutput,
    HindsightOutput,
    InitCohort,
    InitEvent,
    InitHypothesis,
    InitRelation,
    InitVariable,
    PressureShift,
    QuestionReviewOutput,
    QuestionsOutput,
    ReportClaim,
    ReportOutput,
    ReportRef,
    WorldOutput,
)
from worldsim.gateway import batch_of_one
from worldsim.offline.agents import OfflineCohort, offline_moves
from worldsim.offline.build import (
    offline_graph_edits,
    offline_hindsight,
    offline_question_review,
    offline_questions,
)
from worldsim.offline.governance import OfflineGovernance
from worldsim.offline.news import answer_assessment
from worldsim.offline.reporter import OfflineReporter
from worldsim.world.build import world_seeds
from worldsim.world.state import SetCohort
from worldsim.world.views import (
    ForecastContext,
    InitContext,
    ReportContext,
    ReviewContext,
    RoleView,
    TickBatch,
    TickContext,
)

__all__ = ["OfflineModel"]

Answer = Callable[[Any], Awaitable[BaseModel]]


class OfflineModel:
    """The ``offline`` route: seeded rule-based answers from a role's structured view."""

    route = "offline"

    def __init__(self) -> None:
        self._answers: dict[type[BaseModel], Answer] = {
            ActorOutput: _actor,
            CohortOutput: _cohort,
            GovernanceOutput: _governance,
            WorldOutput: _world,
            ReportOutput: _report,
            ForecastOutput: _forecast,
            ChoiceForecastOutput: _choice_forecast,
            HindsightOutput: offline_hindsight,
            GraphEditsOutput: offline_graph_edits,
            QuestionsOutput: offline_questions,
            QuestionReviewOutput: offline_question_review,
            AssessmentOutput: answer_assessment,
        }

    def answers_batch(self, output_type: type[BaseModel]) -> bool:
        """A tick's actors (``ActorOutput``) and a tick's review (``GovernanceOutput``) are
        answered in one pass, as columns."""
        return output_type in _BATCHED

    async def request_batch(self, request: BatchRequest) -> BatchResponse:
        """A tick's agents of an actor role at once (the view: a ``RoleView`` of the tick's
        ``TickBatch``, with ``found``, the ids each agent's search found) as
        :class:`MoveColumns`; a tick's review (a ``RoleView`` of its ``ReviewContext``) as a
        :class:`ColumnVerdict`."""
        view = request.view
        context = view.context if isinstance(view, RoleView) else None
        if request.output_type is ActorOutput and isinstance(context, TickBatch):
            found = view.variables.get("found")
            return BatchResponse(await offline_moves(context, found))
        if request.output_type is GovernanceOutput and isinstance(context, ReviewContext):
            return BatchResponse(OfflineGovernance().verdict(context))
        raise ConfigError(
            f"role '{request.site.role}': the offline model answers a batch of "
            f"{', '.join(t.__name__ for t in _BATCHED)} from a tick's view; this request asks "
            f"for {request.output_type.__name__}",
            field="route",
        )

    async def request(self, request: ModelRequest) -> ModelResponse:
        answer = self._answers.get(request.output_type)
        view = request.view
        if answer is None or not isinstance(view, RoleView):
            known = ", ".join(t.__name__ for t in self._answers)
            what = request.output_type.__name__
            raise ConfigError(
                f"role '{request.site.role}': the offline model answers {known} from a role's "
                f"view; this request asks for {what}"
                + ("" if answer is None else " without a view"),
                field="route",
            )
        output = await answer(view)
        return ModelResponse(output=output, text="")


_BATCHED = (ActorOutput, GovernanceOutput)


async def _actor(view: RoleView) -> ActorOutput:
    """The offline actor's move (:func:`offline_moves`), for a role that asks a model for it
    one agent at a time."""
    ctx = view.context
    assert isinstance(ctx, TickContext)
    # the hits a prompt role's search found for the agent (it shows them as ``evidence``); a
    # role that shows none leaves the search to the offline actor
    evidence = view.variables.get("evidence")
    found = None
    if isinstance(evidence, list):
        found = [tuple(str(hit["id"]) for hit in evidence if isinstance(hit, dict))]
    (p,) = (await offline_moves(batch_of_one(ctx), found)).objects()
    move = ActorMove(
        kind="action",
        endpoint=p.endpoint or "",
        direction=p.direction,
        magnitude=p.magnitude,
        summary=p.summary,
        cites=list(p.cites),
    )
    return ActorOutput(proposals=[move])


async def _cohort(view: RoleView) -> CohortOutput:
    """One archetypal action taken by every member: the cohort's drifted sentiment (for a
    cohort with simulated members, three: following that drift, holding, turning against it)."""
    ctx = view.context
    assert isinstance(ctx, TickContext)
    (p,) = await OfflineCohort().act(ctx)
    row = next(d for d in p.deltas if isinstance(d, SetCohort))
    table = ctx.state.cohorts
    i = table.index(ctx.agent)
    if table.members and table.members[i] is not None:
        # simulated members: most follow the drift, the rest hold or turn against it
        trust, magnitude = row.trust, p.magnitude
        choices = (
            ("follow", p.direction, magnitude, trust),
            ("hold", float(table.sentiment[i]), 0.5 * magnitude, 0.75 * (1 - trust)),
            ("counter", -p.direction, magnitude, 0.25 * (1 - trust)),
        )
        return CohortOutput(
            actions=[
                CohortAction(
                    label=label,
                    endpoint=p.endpoint or "",
                    direction=direction,
                    magnitude=strength,
                    probability=share,
                )
                for label, direction, strength, share in choices
            ],
            attention=row.attention,
            trust=trust,
        )
    return CohortOutput(
        actions=[
            CohortAction(
                label=p.summary.split(": ", 1)[-1][:60],  # the cohort's name is said already
                endpoint=p.endpoint or "",
                direction=p.direction,
                magnitude=p.magnitude,
                probability=1.0,
            )
        ],
        attention=row.attention,
        trust=row.trust,
    )


async def _governance(view: RoleView) -> GovernanceOutput:
    ctx = view.context
    assert isinstance(ctx, ReviewContext)
    return await OfflineGovernance().answer(ctx)


async def _world(view: RoleView) -> WorldOutput:
    """The card's own seeds, or the documented generic world for a card without any."""
    ctx = view.context
    assert isinstance(ctx, InitContext)
    card = ctx.card
    return world_output(world_seeds(card), card)


def world_output(seeds: Seeds, card: Card) -> WorldOutput:
    """``seeds`` as a ``WorldOutput``: the same world, in the schema a model returns."""
    binary = card.kind == "binary"
    return WorldOutput(
        base_rate=seeds.base_rate if binary and seeds.base_rate is not None else 0.5,
        base_rates=None
        if seeds.base_rates is None
        else [EndpointProbability(endpoint=k, p=v) for k, v in seeds.base_rates.items()],
        hazard=seeds.hazard,
        actors=INIT_ACTORS.validate_python(ACTOR_SEEDS.dump_python(list(seeds.actors))),
        cohorts=[InitCohort(**c.model_dump(exclude={"members"})) for c in seeds.cohorts],
        relations=[InitRelation(**r.model_dump()) for r in seeds.relations],
        events=[
            InitEvent(
                id=e.id,
                title=e.title[:200],
                date=_iso(e.date),
                description=e.description[:1000],
                pressure=e.pressure if isinstance(e.pressure, float | int) else 0.0,
                shifts=[]
                if isinstance(e.pressure, float | int)
                else [PressureShift(endpoint=k, by=v) for k, v in e.pressure.items()],
            )
            for e in seeds.events
        ],
        hypotheses=[
            InitHypothesis(
                id=h.id,
                title=h.title[:200],
                endpoint=h.endpoint,
                start=_iso(h.start) if h.start else None,
                end=_iso(h.end) if h.end else None,
                probability=h.probability,
                impact=h.impact,
            )
            for h in seeds.hypotheses
        ],
        variables=[InitVariable(name=k, value=v) for k, v in seeds.variables.items()],
        constraints=list(seeds.constraints),
    )


def _iso(when: Any) -> str:
    return str(when.isoformat().replace("+00:00", "Z"))


async def _report(view: RoleView) -> ReportOutput:
    ctx = view.context
    assert isinstance(ctx, ReportContext)
    report = await OfflineReporter().report(ctx)
    return ReportOutput(
        summary=report.summary[:1500],
        claims=[
            ReportClaim(
                text=c.text[:500],
                refs=[ReportRef(**r.model_dump()) for r in c.refs[:6]],
            )
            for c in report.claims[:12]
        ],
    )


async def _forecast(view: RoleView) -> ForecastOutput:
    """The direct baseline offline: no language model, the card's own base rate."""
    ctx = view.context
    assert isinstance(ctx, ForecastContext)
    seeds = ctx.card.seeds
    if seeds is not None and seeds.base_rate is not None:
        p_yes = seeds.base_rate
        rationale = (
            f"Offline route: no language model was asked. This is the card's seeds base rate "
            f"({p_yes})."
        )
        if seeds.prior_source:
            rationale += f" It comes from {seeds.prior_source}."
    else:
        p_yes = 0.5
        rationale = (
            "Offline route: no language model was asked, and the card gives no seeds base rate, "
            "so this is 0.5."
        )
    return ForecastOutput(
        p_yes=p_yes, rationale=rationale, drivers=[], uncertainties=[], leakage_warning=False
    )


async def _choice_forecast(view: RoleView) -> ChoiceForecastOutput:
    """The direct baseline offline for a multiple-choice card: its base rates, else uniform."""
    ctx = view.context
    assert isinstance(ctx, ForecastContext)
    scored = [ep.id for ep in ctx.card.scored_endpoints]
    seeds = ctx.card.seeds
    if seeds is not None and seeds.base_rates is not None:
        rates = {ep: seeds.base_rates[ep] for ep in scored}
        rationale = "Offline route: no language model was asked. These are the card's base rates."
    else:
        rates = {ep: 1 / len(scored) for ep in scored}
        rationale = (
            "Offline route: no language model was asked, and the card gives no base rates, "
            "so every outcome is equally likely."
        )
    return ChoiceForecastOutput(
        probabilities=[EndpointProbability(endpoint=k, p=v) for k, v in rates.items()],
        rationale=rationale,
        drivers=[],
        uncertainties=[],
        leakage_warning=False,
    )
