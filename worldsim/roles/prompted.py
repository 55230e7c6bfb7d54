"""Prompt roles at run time: prompt in, a validated output schema back, engine types out.

A prompt role's ``output`` decides how its reply is applied, one way per schema:

* ``ActorOutput`` — up to three moves, each a proposal the governance reviews;
* ``CohortOutput`` — an archetype's action distribution; members are sampled from it and the
  cohort proposes one move plus its new attention, trust and sentiment
  (:mod:`worldsim.roles.cohorts`);
* ``GovernanceOutput`` — the tick's review: accepted and rejected proposals, pressure shifts,
  ledger moves, fork candidates, the deadline's forced values;
* ``WorldOutput`` — the initial world (actors, cohorts, relations, events, hypotheses);
* ``ReportOutput`` — the report, whose claims the grounding check resolves.

The request carries the rendered prompt (rendered only if a model reads it) and the role's
structured view, so the offline model answers the same request from structure
(:mod:`worldsim.roles.asking`). The checks between a reply and the world are
:mod:`worldsim.roles.apply`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worldsim.domain.cards import Card
from worldsim.domain.contracts import Model
from worldsim.domain.errors import ConfigError, ModelError
from worldsim.domain.outputs import ActorOutput, GovernanceOutput, ReportOutput, WorldOutput
from worldsim.gateway.tools import batch_of_one
from worldsim.roles.acting import act_each
from worldsim.roles.apply import review_from_columns, review_from_output, seeds_from_output
from worldsim.roles.asking import PromptedRole, public_card, tick_view
from worldsim.roles.cohorts import CohortPrompt
from worldsim.roles.prompts import PromptRole
from worldsim.world.build import WorldSource, build_world, own_world_source
from worldsim.world.columns import ColumnVerdict, MoveColumns, TickReview
from worldsim.world.moves import Claim, ClaimRef, Proposal, Report, Review
from worldsim.world.state import WorldState, actor_columns
from worldsim.world.views import (
    InitContext,
    ReportContext,
    ReviewContext,
    RoleView,
    TickBatch,
    TickContext,
)

__all__ = [
    "ActorPrompt",
    "CohortPrompt",
    "GovernancePrompt",
    "PromptedRole",
    "ReportPrompt",
    "WorldPrompt",
    "prompted_role",
]

EVIDENCE_K = 5


class ActorPrompt(PromptedRole):
    """``ActorOutput``: an agent that proposes moves; it sees evidence the gateway found for it.

    Where its model answers a batch (the offline model), a tick's actors are decided together:
    each searches for its name and the question as it would alone, and the model reads the
    hits and answers every agent's move as columns, without a model round per agent."""

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        if self.batched() is not None:
            moves = await self.act_batch(batch_of_one(ctx))
            return moves.objects() if isinstance(moves, MoveColumns) else moves[ctx.agent]
        actor = ctx.state.actors[ctx.agent]
        evidence: list[dict[str, Any]] = []
        if ctx.tools is not None:
            found = await ctx.tools.call(
                "search_evidence", {"query": _evidence_query(actor.name, ctx.card), "k": EVIDENCE_K}
            )
            evidence = list(found.get("results", []))
        out: ActorOutput = await self.ask(
            self.site(ctx.agent, ctx.timeline, ctx.tick),
            ctx,
            lambda: tick_view(ctx),
            actor=actor,
            evidence=evidence,
            tools=ctx.tools,
        )
        return [
            Proposal(
                agent=ctx.agent,
                index=i,
                kind=m.kind,
                endpoint=m.endpoint,
                direction=m.direction,
                magnitude=m.magnitude,
                summary=m.summary,
                cites=tuple(m.cites),
            )
            for i, m in enumerate(out.proposals)
        ]

    async def act_batch(self, batch: TickBatch) -> Mapping[str, Sequence[Proposal]] | MoveColumns:
        """The tick's agents of this role: decided together where the model answers a batch,
        else one agent at a time (:func:`act_each`)."""
        model = self.batched()
        if model is None:
            return await act_each(self, batch)
        found = None
        if batch.gateway is not None:
            columns = actor_columns(batch.state.actors)
            question = batch.card.question
            queries = [
                _evidence_query(columns.names[r], question) for r in columns.rows(batch.agents)
            ]
            found = await batch.gateway.search_batch(
                batch.agents, queries, EVIDENCE_K, timeline=batch.timeline, tick=batch.tick
            )
        moves = await self.ask_batch(
            model,
            self.site(self.name, batch.timeline, batch.tick),
            RoleView(context=batch, variables={"found": found}),
        )
        if not isinstance(moves, MoveColumns):
            raise ModelError(
                f"{model.route}: the batch's reply is a {type(moves).__name__}, not its moves"
            )
        return moves


def _evidence_query(name: str, question: str | Card) -> str:
    """What an actor searches the evidence for before it answers: its name and the question."""
    return f"{name} {question if isinstance(question, str) else question.question}"


class GovernancePrompt(PromptedRole):
    """``GovernanceOutput``: the tick's review, checked against the world before use."""

    async def review(self, ctx: ReviewContext) -> Review | TickReview:
        model = self.batched()
        if model is not None:
            verdict = await self.ask_batch(
                model, self.site(self.name, ctx.timeline, ctx.tick), RoleView(context=ctx)
            )
            if not isinstance(verdict, ColumnVerdict):
                raise ModelError(
                    f"{model.route}: the review's reply is a {type(verdict).__name__}, "
                    "not a verdict"
                )
            return review_from_columns(verdict, ctx)
        state = ctx.state
        hypotheses = [  # in id order: a map's own order follows the process's hash seed
            h
            for _, h in sorted(state.hypotheses.items())
            if h.status == "open" and h.start_tick <= ctx.tick <= h.end_tick
        ]
        out: GovernanceOutput = await self.ask(
            self.site(self.name, ctx.timeline, ctx.tick),
            ctx,
            lambda: {**tick_view(ctx), "mass": ctx.mass, "is_last_tick": ctx.is_last_tick},
            hypotheses=hypotheses,
            proposals=ctx.proposals,
        )
        return review_from_output(out, ctx)


class WorldPrompt(PromptedRole):
    """``WorldOutput``: the initial world, from the model's reading of the card."""

    def __init__(self, prompt: PromptRole, model: Model, *, seed: int = 0) -> None:
        super().__init__(prompt, model, seed=seed)
        self.problems: list[str] = []
        self.world_source: WorldSource = "model"

    async def initialize(self, ctx: InitContext) -> WorldState:
        own = own_world_source(ctx.card)
        try:
            response = await self.reply(
                self.site(self.name), ctx, lambda: {"card": public_card(ctx), "ticks": ctx.ticks}
            )
        except ModelError as exc:
            if exc.ends_run:
                raise  # a strict replay's miss, a route that gave no reply: the run ends
            # the failed call is traced; the run goes on from the card's own seeds
            state, more = build_world(ctx.card, ctx.ticks)
            self.problems = [f"initializer failed, world built from the card: {exc.message}", *more]
            self.world_source = own
            return state
        # a reply made without a model call (the offline model's, which records none) is the
        # card's own seeds, or the generic world without them
        self.world_source = "model" if response.call else own
        out: WorldOutput = response.output  # type: ignore[assignment]
        seeds, problems = seeds_from_output(out, ctx)
        card = ctx.card.model_copy(update={"seeds": seeds})
        state, more = build_world(card, ctx.ticks)
        self.problems = problems + more
        return state


class ReportPrompt(PromptedRole):
    """``ReportOutput``: the report; the grounding check resolves every reference afterwards."""

    async def report(self, ctx: ReportContext) -> Report:
        out: ReportOutput = await self.ask(
            self.site(self.name),
            ctx,
            lambda: {
                "card": public_card(ctx),
                "p_yes": ctx.p_yes,
                "timelines": ctx.timelines,
                "forks": ctx.forks,
            },
        )
        return Report(
            summary=out.summary,
            claims=tuple(
                Claim(text=c.text, refs=tuple(ClaimRef(**r.model_dump()) for r in c.refs))
                for c in out.claims
            ),
        )


_BY_OUTPUT: dict[str, type[PromptedRole]] = {
    "ActorOutput": ActorPrompt,
    "CohortOutput": CohortPrompt,
    "GovernanceOutput": GovernancePrompt,
    "WorldOutput": WorldPrompt,
    "ReportOutput": ReportPrompt,
}


def prompted_role(prompt: PromptRole, model: Model, *, seed: int = 0) -> PromptedRole:
    """The runnable role for a prompt file: its ``output`` decides how replies are applied."""
    cls = _BY_OUTPUT.get(prompt.meta.output)
    if cls is None:
        raise ConfigError(
            f"a role with output '{prompt.meta.output}' runs as a direct forecast "
            "(`worldsim forecast`), not inside a simulation",
            file=prompt.path,
            field="output",
        )
    return cls(prompt, model, seed=seed)
