"""LLM-backed implementations of the built-in roles: prompt in, validated output, engine types out.

Each role renders its prompt file from ``agents/``, asks its model for a structured reply, and
turns the reply into the engine's own types. Content that is valid JSON but makes no sense in the
world (unknown proposal or endpoint ids, impossible ledger moves) is dropped here with a reason
that the review or the initialization problems carry into the trace.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

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
    ActorOutput,
    CohortOutput,
    GovernanceOutput,
    InitializerOutput,
    ReporterOutput,
)
from worldsim.gateway.tools import GATEWAY_TOOLS
from worldsim.roles.prompts import PromptRole, load_prompt_role
from worldsim.roles.registry import (
    BranchCandidate,
    Claim,
    ClaimRef,
    InitContext,
    Proposal,
    ProposalRef,
    RejectedProposal,
    Report,
    ReportContext,
    Review,
    ReviewContext,
    TickContext,
)
from worldsim.world.build import build_world
from worldsim.world.state import (
    EvidenceIn,
    LedgerUpdate,
    SetCohort,
    SetHypothesis,
    ShiftPressure,
    WorldState,
)

__all__ = [
    "BUILTIN_LLM_ROLES",
    "LLMActor",
    "LLMCohort",
    "LLMGovernance",
    "LLMInitializer",
    "LLMReporter",
    "LLMRole",
    "llm_role",
]

#: Members sampled from a cohort's action distribution (cost grows with cohorts, not people).
COHORT_SAMPLE = 50
EVIDENCE_K = 5


class LLMRole:
    """Shared machinery: render the role's prompt, ask the model, return the validated output."""

    name = "llm"
    phase = "tick"

    def __init__(self, prompt: PromptRole, model: Model, *, seed: int = 0) -> None:
        self.prompt = prompt
        self.model = model
        self.seed = seed

    @property
    def prompt_version(self) -> str:
        return self.prompt.version

    @property
    def route(self) -> str:
        return self.model.route

    async def ask(
        self,
        output: type[BaseModel],
        site: CallSite,
        *,
        tools: Any = None,
        **context: Any,
    ) -> Any:
        """Render the prompt and ask; with ``tools`` (an agent's gateway tools) the model may
        search and open documents before it answers, every access logged by the tool."""
        system, user = self.prompt.render(**context)
        messages = (ChatMessage("system", system), ChatMessage("user", user))
        request = ModelRequest(
            messages=messages if system else messages[1:],
            output_type=output,
            site=site,
            prompt_version=self.prompt.version,
            temperature=self.prompt.meta.temperature,
            seed=self.seed,
            max_tokens=self.prompt.meta.max_tokens,
        )
        if tools is not None and self.prompt.meta.tools:
            offered = tuple(s.openai() for s in GATEWAY_TOOLS if s.name in self.prompt.meta.tools)

            async def run_tool(name: str, arguments: str) -> str:
                try:
                    result = await tools.call(name, arguments)
                except ConfigError as exc:  # the model's malformed call is its to read
                    result = {"error": exc.message}
                return json.dumps(result)

            request = dataclasses.replace(request, tools=offered, tool_handler=run_tool)
        response = await self.model.request(request)
        return response.output


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


class LLMActor(LLMRole):
    """An actor played by a model; it sees evidence the gateway retrieved for it."""

    name = "actor"
    phase = "tick"

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        actor = ctx.state.actors[ctx.agent]
        evidence: list[dict[str, Any]] = []
        if ctx.tools is not None:
            found = await ctx.tools.call(
                "search_evidence", {"query": f"{actor.name} {ctx.card.question}", "k": EVIDENCE_K}
            )
            evidence = list(found.get("results", []))
        out: ActorOutput = await self.ask(
            ActorOutput,
            CallSite(role="actor", agent=ctx.agent, timeline=ctx.timeline, tick=ctx.tick),
            **_tick_view(ctx),
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


class LLMCohort(LLMRole):
    """A cohort as an archetype: one call returns a distribution, members are sampled from it."""

    name = "cohort"
    phase = "tick"

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
            CohortOutput,
            CallSite(role="cohort", agent=ctx.agent, timeline=ctx.timeline, tick=ctx.tick),
            **_tick_view(ctx),
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


class LLMGovernance(LLMRole):
    """The reviewer played by a model; its verdict is checked against the world before use."""

    name = "governance"
    phase = "review"

    async def review(self, ctx: ReviewContext) -> Review:
        state = ctx.state
        hypotheses = [
            h
            for h in state.hypotheses.values()
            if h.status == "open" and h.start_tick <= ctx.tick <= h.end_tick
        ]
        out: GovernanceOutput = await self.ask(
            GovernanceOutput,
            CallSite(role="governance", agent="governance", timeline=ctx.timeline, tick=ctx.tick),
            **_tick_view(ctx),
            mass=ctx.mass,
            hypotheses=hypotheses,
            proposals=ctx.proposals,
            is_last_tick=ctx.is_last_tick,
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
                    for h in state.hypotheses.values()
                    if h.status == "open" and h.title == idea.hypothesis
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
    forced = out.forced_p_yes if ctx.is_last_tick and realized is None else None
    if ctx.is_last_tick and realized is None and forced is None:
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
    )


class LLMInitializer(LLMRole):
    """Builds the world from the model's reading of the card."""

    name = "initializer"
    phase = "init"

    def __init__(self, prompt: PromptRole, model: Model, *, seed: int = 0) -> None:
        super().__init__(prompt, model, seed=seed)
        self.problems: list[str] = []

    async def initialize(self, ctx: InitContext) -> WorldState:
        try:
            out: InitializerOutput = await self.ask(
                InitializerOutput,
                CallSite(role="initializer", agent="initializer"),
                card=_card(ctx),
                ticks=ctx.ticks,
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
    base = re.sub(r"[^A-Za-z0-9_.:-]+", "_", text).strip("_")[:40] or fallback
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}_{n}"
    taken.add(slug)
    return slug


def seeds_from_output(out: InitializerOutput, ctx: InitContext) -> tuple[Seeds, list[str]]:
    problems: list[str] = []
    endpoints = {ep.id for ep in ctx.card.endpoints}
    taken: set[str] = set()
    renamed: dict[str, str] = {}
    actors = []
    for i, a in enumerate(out.actors):
        new = _slug(a.id, f"actor{i}", taken)
        renamed.setdefault(a.id, new)
        actors.append(ActorSeed(**{**a.model_dump(), "id": new}))
    cohorts = []
    for i, c in enumerate(out.cohorts):
        new = _slug(c.id, f"cohort{i}", taken)
        renamed.setdefault(c.id, new)
        cohorts.append(CohortSeed(**{**c.model_dump(), "id": new}))
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
                    pressure=e.pressure,
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
        hypotheses.append(
            HypothesisSeed(**{**h.model_dump(), "id": _slug(h.id, f"hypothesis{i}", hyp_ids)})
        )
    binary = ctx.card.kind == "binary"
    seeds = Seeds(
        base_rate=out.base_rate if binary else None,
        base_rates=None
        if binary
        else {ep.id: 1 / len(ctx.card.scored_endpoints) for ep in ctx.card.scored_endpoints},
        hazard=out.hazard,
        actors=tuple(actors),
        cohorts=tuple(cohorts),
        relations=tuple(relations),
        events=tuple(events),
        hypotheses=tuple(hypotheses),
        constraints=tuple(out.constraints),
    )
    return seeds, problems


class LLMReporter(LLMRole):
    """Writes the report; the grounding check resolves every reference afterwards."""

    name = "reporter"
    phase = "report"

    async def report(self, ctx: ReportContext) -> Report:
        out: ReporterOutput = await self.ask(
            ReporterOutput,
            CallSite(role="reporter", agent="reporter"),
            card=_card(ctx),
            p_yes=ctx.p_yes,
            timelines=ctx.timelines,
            forks=ctx.forks,
        )
        return Report(
            summary=out.summary,
            claims=tuple(
                Claim(text=c.text, refs=tuple(ClaimRef(**r.model_dump()) for r in c.refs))
                for c in out.claims
            ),
        )


BUILTIN_LLM_ROLES = frozenset({"initializer", "actor", "cohort", "governance", "reporter"})
"""The built-in roles that have prompt files and LLM implementations."""

_CLASSES: dict[str, type[LLMRole]] = {
    "initializer": LLMInitializer,
    "actor": LLMActor,
    "cohort": LLMCohort,
    "governance": LLMGovernance,
    "reporter": LLMReporter,
}


def llm_role(name: str, model: Model, *, seed: int = 0) -> LLMRole:
    """The LLM implementation of built-in role ``name``, with its prompt from ``agents/``."""
    return _CLASSES[name](load_prompt_role(name), model, seed=seed)
