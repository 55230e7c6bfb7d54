"""Prompt roles at run time: prompt in, a validated output schema back, engine types out.

A prompt role's ``output`` decides how its reply is applied, one way per schema:

* ``ActorOutput`` — up to three moves, each a proposal the governance reviews;
* ``CohortOutput`` — an archetype's action distribution; members are sampled from it and the
  cohort proposes one move plus its new attention, trust and sentiment;
* ``GovernanceOutput`` — the tick's review: accepted and rejected proposals, pressure shifts,
  ledger moves, fork candidates, the deadline's forced values;
* ``WorldOutput`` — the initial world (actors, cohorts, relations, events, hypotheses);
* ``ReportOutput`` — the report, whose claims the grounding check resolves.

The request carries the rendered prompt (rendered only if a model reads it) and the role's
structured view, so the offline model answers the same request from structure. The checks
between a reply and the world are :mod:`worldsim.roles.apply`.
"""

from __future__ import annotations

import functools
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from worldsim.domain.cards import Card
from worldsim.domain.contracts import (
    BatchModel,
    BatchRequest,
    CallSite,
    ChatMessage,
    Model,
    ModelRequest,
    ModelResponse,
)
from worldsim.domain.errors import ConfigError, ModelError
from worldsim.domain.outputs import (
    OUTPUTS,
    ActorOutput,
    CohortOutput,
    GovernanceOutput,
    ReportOutput,
    WorldOutput,
)
from worldsim.gateway.tools import GATEWAY_TOOLS, batch_of_one
from worldsim.roles.acting import act_each
from worldsim.roles.apply import review_from_columns, review_from_output, seeds_from_output
from worldsim.roles.prompts import PromptRole
from worldsim.world.build import WorldSource, build_world, own_world_source
from worldsim.world.columns import ColumnVerdict, MoveColumns, TickReview
from worldsim.world.moves import (
    Claim,
    ClaimRef,
    Proposal,
    Report,
    Review,
)
from worldsim.world.state import (
    MemberAction,
    SetCohort,
    UpdateMembers,
    WorldState,
    actor_columns,
)
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

#: Members sampled from a cohort's action distribution (cost grows with cohorts, not people).
COHORT_SAMPLE = 50
EVIDENCE_K = 5


class PromptedRole:
    """Shared machinery: render the role's prompt, ask the model, return the validated output."""

    def __init__(self, prompt: PromptRole, model: Model, *, seed: int = 0) -> None:
        self.prompt = prompt
        self.model = model
        self.seed = seed
        self.name = prompt.name
        self.phase = prompt.meta.phase
        self.output_type = OUTPUTS[prompt.meta.output]

    @property
    def prompt_version(self) -> str:
        return self.prompt.version

    @property
    def route(self) -> str:
        return self.model.route

    def site(self, agent: str, timeline: str | None = None, tick: int | None = None) -> CallSite:
        return CallSite(role=self.name, agent=agent, timeline=timeline, tick=tick)

    def batched(self) -> BatchModel | None:
        """The role's model where it answers this role's output for a batch at once."""
        model = self.model
        if isinstance(model, BatchModel) and model.answers_batch(self.output_type):
            return model
        return None

    async def ask_batch(self, model: BatchModel, site: CallSite, view: RoleView) -> Any:
        """Ask a batch model for a batch's output in its column form."""
        request = BatchRequest(
            output_type=self.output_type,
            site=site,
            prompt_version=self.prompt.version,
            view=view,
            seed=self.seed,
        )
        return (await model.request_batch(request)).output

    async def ask(
        self,
        site: CallSite,
        context: InitContext | TickContext | ReviewContext | ReportContext,
        variables: Callable[[], Mapping[str, Any]],
        *,
        tools: Any = None,
        **structured: Any,
    ) -> Any:
        """Ask the model for this role's output. The prompt is rendered from ``variables()``
        only when a model reads the messages; ``structured`` (values already at hand) joins
        the view. With ``tools`` (an agent's gateway tools) the model may search and open
        documents before it answers, every access logged by the tool."""
        response = await self.reply(site, context, variables, tools=tools, **structured)
        return response.output

    async def reply(
        self,
        site: CallSite,
        context: InitContext | TickContext | ReviewContext | ReportContext,
        variables: Callable[[], Mapping[str, Any]],
        *,
        tools: Any = None,
        **structured: Any,
    ) -> ModelResponse:
        """:meth:`ask`, the whole response (the call it made, if any)."""
        prompt = self.prompt
        once: list[tuple[ChatMessage, ...]] = []

        def messages() -> tuple[ChatMessage, ...]:
            if not once:
                system, user = prompt.render(**variables(), **structured)
                user_message = ChatMessage("user", user)
                once.append(
                    (ChatMessage("system", system), user_message) if system else (user_message,)
                )
            return once[0]

        offered: tuple[dict[str, Any], ...] = ()
        handler = None
        if tools is not None and prompt.meta.tools:
            offered = _offered(prompt.meta.tools)

            async def handler(name: str, arguments: str) -> str:
                try:
                    result = await tools.call(name, arguments)
                except ConfigError as exc:  # the model's malformed call is its to read
                    result = {"error": exc.message}
                return json.dumps(result)

        request = ModelRequest(
            messages=messages,
            view=RoleView(context=context, variables=structured),
            output_type=self.output_type,
            site=site,
            prompt_version=prompt.version,
            temperature=prompt.meta.temperature,
            seed=self.seed,
            max_tokens=prompt.meta.max_tokens,
            tools=offered,
            tool_handler=handler,
        )
        response = await self.model.request(request)
        if not isinstance(response.output, self.output_type):
            raise ModelError(
                f"{self.model.route}: the reply is a {type(response.output).__name__}, "
                f"not a {self.output_type.__name__}"
            )
        return response


@functools.cache
def _offered(names: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    """The OpenAI descriptors of the named gateway tools (built once per set of names)."""
    return tuple(spec.openai() for spec in GATEWAY_TOOLS if spec.name in names)


def _endpoint_rows(state: WorldState) -> list[dict[str, Any]]:
    probs = state.probabilities()
    return [
        {
            "id": ep.id,
            "title": ep.title,
            "kind": ep.kind,
            "p": probs.get(ep.id),
            "status": state.ledger[ep.id].status,
        }
        for ep in state.endpoints
    ]


def _tick_view(ctx: TickContext | ReviewContext) -> dict[str, Any]:
    """What every per-tick prompt shows: the card, where in time it is, the endpoints."""
    return {
        "card": _card(ctx),
        "tick": ctx.tick,
        "ticks": ctx.ticks,
        "timeline": ctx.timeline,
        "date": ctx.date.date().isoformat(),
        "endpoints": _endpoint_rows(ctx.state),
        "observations": ctx.observations,
    }


def _card(ctx: Any) -> dict[str, Any]:
    # documents reach agents only through the gateway, never from the card
    data: dict[str, Any] = ctx.card.model_dump(mode="json", exclude={"evidence", "seeds"})
    return data


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
            lambda: _tick_view(ctx),
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


class CohortPrompt(PromptedRole):
    """``CohortOutput``: an archetype's action distribution; members are sampled from it."""

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        table = ctx.state.cohorts
        i = table.index(ctx.agent)
        cohort = {
            "name": table.names[i],
            "size": int(table.size[i]),
            "attention": float(table.attention[i]),
            "trust": float(table.trust[i]),
            "sentiment": float(table.sentiment[i]),
        }
        out: CohortOutput = await self.ask(
            self.site(ctx.agent, ctx.timeline, ctx.tick),
            ctx,
            lambda: _tick_view(ctx),
            cohort=cohort,
        )
        shares = _shares(out)
        if table.members and table.members[i] is not None:
            return [_members_move(ctx, out, shares, table.names[i])]
        members = min(COHORT_SAMPLE, int(table.size[i]))
        picks = ctx.rng.choice(len(out.actions), size=members, p=np.array(shares))
        counts = Counter(int(p) for p in picks)
        direction = float(sum(out.actions[k].direction * n for k, n in counts.items()) / members)
        magnitude = float(sum(out.actions[k].magnitude * n for k, n in counts.items()) / members)
        top = max(counts, key=lambda k: (counts[k], -k))
        summary = ", ".join(
            f"{out.actions[k].label} ×{n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])
        )
        return [
            Proposal(
                agent=ctx.agent,
                index=0,
                kind="cohort_update",
                endpoint=out.actions[top].endpoint,
                direction=float(np.clip(direction, -1, 1)),
                magnitude=float(np.clip(magnitude, 0, 1)),
                summary=f"{cohort['name']} ({members} sampled): {summary}"[:500],
                deltas=(
                    SetCohort(
                        id=ctx.agent,
                        attention=out.attention,
                        trust=out.trust,
                        sentiment=float(np.clip(direction, -1, 1)),
                    ),
                ),
            )
        ]


def _shares(out: CohortOutput) -> list[float]:
    """The share of members taking each action: the probabilities normalised (equal shares
    when they are all zero)."""
    total = math.fsum(a.probability for a in out.actions)
    if total > 0:
        return [a.probability / total for a in out.actions]
    return [1 / len(out.actions)] * len(out.actions)


def _members_move(
    ctx: TickContext, out: CohortOutput, shares: Sequence[float], name: str
) -> Proposal:
    """A cohort's proposal when its members are simulated: the archetype's actions go to every
    member in one ``update_members`` delta, and the proposal pushes the likeliest action's
    endpoint with the actions' expected direction and magnitude."""
    pairs = list(zip(out.actions, shares, strict=True))
    return Proposal(
        agent=ctx.agent,
        index=0,
        kind="cohort_update",
        endpoint=max(out.actions, key=lambda a: a.probability).endpoint,
        direction=min(1.0, max(-1.0, math.fsum(a.direction * w for a, w in pairs))),
        magnitude=min(1.0, max(0.0, math.fsum(a.magnitude * w for a, w in pairs))),
        summary=f"{name} (all members): {', '.join(f'{a.label} {w:.0%}' for a, w in pairs)}"[:500],
        deltas=(
            UpdateMembers(
                id=ctx.agent,
                actions=tuple(
                    MemberAction(direction=a.direction, magnitude=a.magnitude, probability=w)
                    for a, w in pairs
                ),
                attention=out.attention,
                trust=out.trust,
                draw=int(ctx.rng.integers(2**63)),
            ),
        ),
    )


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
        hypotheses = [
            h
            for h in state.hypotheses.values()
            if h.status == "open" and h.start_tick <= ctx.tick <= h.end_tick
        ]
        out: GovernanceOutput = await self.ask(
            self.site(self.name, ctx.timeline, ctx.tick),
            ctx,
            lambda: {**_tick_view(ctx), "mass": ctx.mass, "is_last_tick": ctx.is_last_tick},
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
                self.site(self.name), ctx, lambda: {"card": _card(ctx), "ticks": ctx.ticks}
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
                "card": _card(ctx),
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
