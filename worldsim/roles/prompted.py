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
structured view, so the offline model answers the same request from structure. Content that is
valid JSON but makes no sense in the world (unknown proposal or endpoint ids, impossible ledger
moves) is dropped here with a reason that the review or the initialization problems carry into
the trace.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from worldsim.domain.cards import (
    ActorSeed,
    CohortSeed,
    EventSeed,
    HypothesisSeed,
    RelationSeed,
    Seeds,
)
from worldsim.domain.contracts import CallSite, ChatMessage, Model, ModelRequest
from worldsim.domain.errors import ConfigError, ModelError, ReplayMissError
from worldsim.domain.outputs import (
    OUTPUTS,
    ActorOutput,
    CohortOutput,
    GovernanceOutput,
    InitActor,
    InitCohort,
    ReportOutput,
    WorldOutput,
)
from worldsim.gateway.tools import GATEWAY_TOOLS
from worldsim.roles.prompts import PromptRole
from worldsim.roles.registry import registered_roles
from worldsim.world.build import build_world
from worldsim.world.moves import (
    BranchCandidate,
    Claim,
    ClaimRef,
    Proposal,
    ProposalRef,
    RejectedProposal,
    Report,
    Review,
)
from worldsim.world.state import (
    EvidenceIn,
    LedgerUpdate,
    SetCohort,
    SetHypothesis,
    ShiftPressure,
    WorldState,
)
from worldsim.world.views import InitContext, ReportContext, ReviewContext, RoleView, TickContext

__all__ = [
    "ActorPrompt",
    "CohortPrompt",
    "GovernancePrompt",
    "PromptedRole",
    "ReportPrompt",
    "WorldPrompt",
    "prompted_role",
    "review_from_output",
    "seeds_from_output",
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
        prompt = self.prompt

        @functools.cache
        def messages() -> tuple[ChatMessage, ...]:
            system, user = prompt.render(**variables(), **structured)
            user_message = ChatMessage("user", user)
            return (ChatMessage("system", system), user_message) if system else (user_message,)

        request = ModelRequest(
            messages=messages,
            view=RoleView(context=context, variables=structured),
            output_type=self.output_type,
            site=site,
            prompt_version=self.prompt.version,
            temperature=self.prompt.meta.temperature,
            seed=self.seed,
            max_tokens=self.prompt.meta.max_tokens,
        )
        if tools is not None and self.prompt.meta.tools:
            offered = _offered(self.prompt.meta.tools)

            async def run_tool(name: str, arguments: str) -> str:
                try:
                    result = await tools.call(name, arguments)
                except ConfigError as exc:  # the model's malformed call is its to read
                    result = {"error": exc.message}
                return json.dumps(result)

            request = dataclasses.replace(request, tools=offered, tool_handler=run_tool)
        response = await self.model.request(request)
        if not isinstance(response.output, self.output_type):
            raise ModelError(
                f"{self.model.route}: the reply is a {type(response.output).__name__}, "
                f"not a {self.output_type.__name__}"
            )
        return response.output


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
    """``ActorOutput``: an agent that proposes moves; it sees evidence the gateway found for it."""

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        actor = ctx.state.actors[ctx.agent]
        evidence: list[dict[str, Any]] = []
        if ctx.tools is not None:
            found = await ctx.tools.call(
                "search_evidence", {"query": f"{actor.name} {ctx.card.question}", "k": EVIDENCE_K}
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
        weights = np.array([a.probability for a in out.actions], dtype=np.float64)
        weights = (
            weights / weights.sum()
            if weights.sum() > 0
            else np.full(len(weights), 1 / len(weights))
        )
        members = min(COHORT_SAMPLE, int(table.size[i]))
        picks = ctx.rng.choice(len(out.actions), size=members, p=weights)
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


class GovernancePrompt(PromptedRole):
    """``GovernanceOutput``: the tick's review, checked against the world before use."""

    async def review(self, ctx: ReviewContext) -> Review:
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


def review_from_output(out: GovernanceOutput, ctx: ReviewContext) -> Review:
    """Turn a model's verdict into a Review, dropping what the world cannot take, with reasons."""
    state = ctx.state
    notes: list[str] = []
    by_id = {f"{p.agent}#{p.index}": p for p in ctx.proposals}
    scored = {ep.id for ep in state.scored}
    known = {ep.id for ep in state.endpoints}
    accepted: list[ProposalRef] = []
    rejected: list[RejectedProposal] = []
    deltas: list[Any] = []
    for pid in dict.fromkeys(out.accepted):
        p = by_id.get(pid)
        if p is None:
            notes.append(f"accepted unknown proposal '{pid}': ignored")
            continue
        accepted.append(ProposalRef(agent=p.agent, index=p.index))
        deltas.extend(p.deltas)
    decided = {f"{r.agent}#{r.index}" for r in accepted}
    for r in out.rejected:
        p = by_id.get(r.proposal)
        if p is None or r.proposal in decided:
            notes.append(f"rejection of '{r.proposal}' ignored (unknown or already accepted)")
            continue
        rejected.append(RejectedProposal(agent=p.agent, index=p.index, reason=r.reason))
        decided.add(r.proposal)
    for pid, p in by_id.items():
        if pid not in decided:
            rejected.append(RejectedProposal(agent=p.agent, index=p.index, reason="not reviewed"))
    for shift in out.pressure:
        if shift.endpoint not in scored or state.ledger[shift.endpoint].status != "open":
            notes.append(f"pressure on '{shift.endpoint}' dropped: not an open scored endpoint")
            continue
        deltas.append(ShiftPressure(endpoint=shift.endpoint, by=shift.by))

    ledger: list[LedgerUpdate] = []
    realized: str | None = None
    for move in out.ledger:
        if move.endpoint not in known:
            notes.append(f"ledger move on unknown endpoint '{move.endpoint}' dropped")
            continue
        status = move.status
        if status is not None and state.ledger[move.endpoint].status != "open":
            notes.append(f"'{move.endpoint}' is already settled: {status} dropped")
            status = None
        if status == "realized" and move.endpoint in scored:
            if realized is not None:
                notes.append(f"second realized endpoint '{move.endpoint}' dropped")
                status = None
            else:
                realized = move.endpoint
        evidence = (
            EvidenceIn(kind=move.evidence, ref=move.ref or "review", note=move.note)
            if move.evidence is not None
            else None
        )
        if status is not None or evidence is not None:
            ledger.append(LedgerUpdate(endpoint=move.endpoint, status=status, evidence=evidence))
    if realized is not None:
        moved = {u.endpoint for u in ledger if u.status is not None}
        for ep in state.scored:
            if ep.id != realized and ep.id not in moved and state.ledger[ep.id].status == "open":
                ledger.append(LedgerUpdate(endpoint=ep.id, status="eliminated"))
        ledger = [
            u
            for u in ledger
            if not (u.endpoint in scored and u.endpoint != realized and u.status == "realized")
        ]

    branches: list[BranchCandidate] = []
    if realized is None and not ctx.is_last_tick:
        for idea in out.branches:
            if idea.endpoint_id not in known:
                notes.append(f"branch on unknown endpoint '{idea.endpoint_id}' dropped")
                continue
            match = next(
                (
                    h
                    for h in sorted(state.hypotheses.values(), key=lambda h: h.id)
                    if h.status == "open"
                    and (
                        h.id == idea.hypothesis_id
                        if idea.hypothesis_id
                        else h.title == idea.hypothesis
                    )
                ),
                None,
            )
            if_true: list[Any] = []
            if match is not None:
                if_true.append(SetHypothesis(id=match.id, status="fired"))
            if idea.endpoint_id in scored:
                if_true.append(ShiftPressure(endpoint=idea.endpoint_id, by=idea.impact))
            branches.append(
                BranchCandidate(
                    hypothesis=idea.hypothesis,
                    hypothesis_id=match.id if match else None,
                    endpoint_id=idea.endpoint_id,
                    probability=idea.probability,
                    score=idea.score,
                    if_true=tuple(if_true),
                )
            )
    # forced values count where a timeline ends unresolved: at the deadline, or when the
    # reviewer ends it (the offline model does when the question resolves before the deadline)
    deadline = ctx.is_last_tick and realized is None
    ending = realized is None and (ctx.is_last_tick or out.decision == "terminate")
    forced = out.forced_p_yes if ending else None
    forced_probs: dict[str, float] | None = None
    if ending and out.forced_probs is not None:
        forced_probs = {f.endpoint: f.p for f in out.forced_probs if f.endpoint in scored}
        if set(forced_probs) != scored:
            notes.append("forced probabilities do not cover the scored endpoints: dropped")
            forced_probs = None
    if deadline and forced is None and forced_probs is None:
        notes.append("no forced p_yes on the last tick: unresolved paths count 0.5")
    reason = out.reason
    if notes:
        reason = (reason + " | dropped: " + "; ".join(notes))[:500]
    return Review(
        accepted=tuple(accepted),
        rejected=tuple(rejected),
        deltas=tuple(deltas),
        ledger=tuple(ledger),
        decision="fork"
        if branches and out.decision != "terminate"
        else ("terminate" if out.decision == "terminate" else "continue"),
        reason=reason,
        branches=tuple(branches),
        forced_p_yes=forced,
        forced_probs=forced_probs,
    )


class WorldPrompt(PromptedRole):
    """``WorldOutput``: the initial world, from the model's reading of the card."""

    def __init__(self, prompt: PromptRole, model: Model, *, seed: int = 0) -> None:
        super().__init__(prompt, model, seed=seed)
        self.problems: list[str] = []

    async def initialize(self, ctx: InitContext) -> WorldState:
        try:
            out: WorldOutput = await self.ask(
                self.site(self.name), ctx, lambda: {"card": _card(ctx), "ticks": ctx.ticks}
            )
        except ModelError as exc:
            if isinstance(exc, ReplayMissError):
                raise  # strict replay: a miss ends the run
            # the failed call is traced; the run goes on from the card's own seeds
            state, more = build_world(ctx.card, ctx.ticks)
            self.problems = [f"initializer failed, world built from the card: {exc.message}", *more]
            return state
        seeds, problems = seeds_from_output(out, ctx)
        card = ctx.card.model_copy(update={"seeds": seeds})
        state, more = build_world(card, ctx.ticks)
        self.problems = problems + more
        return state


def _slug(text: str, fallback: str, taken: set[str]) -> str:
    """A valid, unused id from whatever the model wrote."""
    base = re.sub(r"[^A-Za-z0-9_.:-]+", "_", text).strip("_")[:80] or fallback
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}_{n}"
    taken.add(slug)
    return slug


def seeds_from_output(out: WorldOutput, ctx: InitContext) -> tuple[Seeds, list[str]]:
    problems: list[str] = []
    endpoints = {ep.id for ep in ctx.card.endpoints}
    taken: set[str] = set()
    renamed: dict[str, str] = {}

    def agent_seed(item: InitActor | InitCohort, cls: type[Any], fallback: str, role: str) -> Any:
        new = _slug(item.id, fallback, taken)
        renamed.setdefault(item.id, new)
        role = _tick_role(item.role, role, problems)
        return cls(**{**item.model_dump(), "id": new, "role": role})

    actors = [agent_seed(a, ActorSeed, f"actor{i}", "actor") for i, a in enumerate(out.actors)]
    for i, a in enumerate(out.actors):
        if a.favours is not None and a.favours not in endpoints:
            problems.append(f"actor '{a.id}' favours unknown endpoint '{a.favours}': ignored")
            actors[i] = actors[i].model_copy(update={"favours": None})
    cohorts = [agent_seed(c, CohortSeed, f"cohort{i}", "cohort") for i, c in enumerate(out.cohorts)]
    relations = []
    for r in out.relations:
        if r.source not in renamed or r.target not in renamed:
            problems.append(f"relation {r.source}->{r.target} names an unknown agent: dropped")
            continue
        relations.append(
            RelationSeed(source=renamed[r.source], target=renamed[r.target], weight=r.weight)
        )
    events = []
    event_ids: set[str] = set()
    for i, e in enumerate(out.events):
        try:
            events.append(
                EventSeed(
                    id=_slug(e.id, f"event{i}", event_ids),
                    title=e.title,
                    date=e.date,
                    description=e.description,
                    pressure={x.endpoint: x.by for x in e.shifts} if e.shifts else e.pressure,
                )
            )
        except ValueError:
            problems.append(f"event '{e.id}' has an unreadable date {e.date!r}: dropped")
    hypotheses = []
    hyp_ids: set[str] = set()
    for i, h in enumerate(out.hypotheses):
        if h.endpoint not in endpoints:
            problems.append(f"hypothesis '{h.id}' targets unknown endpoint '{h.endpoint}': dropped")
            continue
        try:
            hypotheses.append(
                HypothesisSeed(**{**h.model_dump(), "id": _slug(h.id, f"hypothesis{i}", hyp_ids)})
            )
        except ValueError:
            problems.append(f"hypothesis '{h.id}' has an unreadable window: dropped")
    binary = ctx.card.kind == "binary"
    seeds = Seeds(
        base_rate=out.base_rate if binary else None,
        base_rates=None if binary else _base_rates(out, ctx, problems),
        hazard=out.hazard,
        actors=tuple(actors),
        cohorts=tuple(cohorts),
        relations=tuple(relations),
        events=tuple(events),
        hypotheses=tuple(hypotheses),
        variables={v.name: v.value for v in out.variables},
        constraints=tuple(out.constraints),
    )
    return seeds, problems


def _tick_role(name: str, default: str, problems: list[str]) -> str:
    """``name`` if it is a runnable tick role, else ``default`` (with a problem noted)."""
    spec = registered_roles().get(name)
    if spec is not None and spec.phase == "tick":
        return name
    problems.append(f"role '{name[:80]}' is not a tick role: '{default}' plays it")
    return default


def _base_rates(out: WorldOutput, ctx: InitContext, problems: list[str]) -> dict[str, float]:
    """A multiple-choice prior: the model's if it covers the scored endpoints, else uniform."""
    scored = [ep.id for ep in ctx.card.scored_endpoints]
    given = {b.endpoint: b.p for b in out.base_rates or ()}
    if set(given) == set(scored) and all(v > 0 for v in given.values()):
        total = sum(given.values())
        return {k: given[k] / total for k in scored}
    if out.base_rates is not None:
        problems.append("base rates do not cover the scored endpoints: uniform prior used")
    return {k: 1 / len(scored) for k in scored}


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
