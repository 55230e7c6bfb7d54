"""How a model's reply is applied to the world: the checks between an output and the engine.

Content that is valid JSON but makes no sense in the world (unknown proposal or endpoint ids,
impossible ledger moves, roles that do not exist) is dropped here, with a reason that the
review or the initialization problems carry into the trace.

* :func:`review_from_output` — a ``GovernanceOutput`` becomes the tick's :class:`Review`;
* :func:`seeds_from_output` — a ``WorldOutput`` becomes the card's :class:`Seeds`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import ValidationError

from worldsim.domain.cards import (
    ACTOR_SEEDS,
    ActorSeed,
    CohortSeed,
    EventSeed,
    HypothesisSeed,
    RelationSeed,
    Seeds,
)
from worldsim.domain.errors import ModelError
from worldsim.domain.outputs import (
    INIT_ACTORS,
    GovernanceOutput,
    InitActor,
    InitCohort,
    WorldOutput,
)
from worldsim.world.columns import ColumnVerdict, TickProposals, TickReview, rejected_of
from worldsim.world.moves import BranchCandidate, RejectedProposal, Review
from worldsim.world.state import SetHypothesis, ShiftPressure
from worldsim.world.views import InitContext, ReviewContext

__all__ = ["review_from_columns", "review_from_output", "seeds_from_output"]


def review_from_output(out: GovernanceOutput, ctx: ReviewContext) -> Review:
    """Turn a model's verdict into a Review, dropping what the world cannot take, with reasons."""
    notes: list[str] = []
    by_id = {f"{p.agent}#{p.index}": p for p in ctx.proposals}
    # accepted proposals and ledger updates as plain data, validated with the review in one
    # call (one at a time costs about twice as much, with one of each per accepted proposal)
    accepted: list[dict[str, Any]] = []
    rejected: list[RejectedProposal] = []
    deltas: list[Any] = []
    decided: set[str] = set()
    for pid in dict.fromkeys(out.accepted):
        p = by_id.get(pid)
        if p is None:
            notes.append(f"accepted unknown proposal '{pid}': ignored")
            continue
        accepted.append({"agent": p.agent, "index": p.index})
        deltas.extend(p.deltas)
        decided.add(pid)
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
    rest = _the_rest(out, ctx, notes, deltas)
    return Review.model_validate({"accepted": accepted, "rejected": rejected, **rest})


def review_from_columns(verdict: ColumnVerdict, ctx: ReviewContext) -> TickReview:
    """Turn a verdict read from a tick's proposal columns into a :class:`TickReview`, with the
    checks of :func:`review_from_output`: a rejection of an unknown or accepted proposal is
    ignored, an undecided proposal is rejected as not reviewed, evidence on an unknown
    endpoint is dropped, and the rest of the verdict is checked as a model's reply is."""
    given = ctx.proposals
    proposals = given if isinstance(given, TickProposals) else TickProposals(None, given)
    n = len(proposals)
    mask = np.asarray(verdict.accepted, dtype=bool)
    if mask.shape != (n,):
        raise ModelError(f"the verdict decides {mask.size} proposals of the tick's {n}")
    notes: list[str] = []
    deltas: list[Any] = []
    for pos, p in proposals.objects_at():
        if mask[pos]:
            deltas.extend(p.deltas)
    decided = mask.copy()
    reasons: dict[int, str] = {}
    for pos, reason in verdict.rejected.items():
        if not 0 <= pos < n or decided[pos]:
            notes.append(f"rejection of proposal {pos} ignored (unknown or already accepted)")
            continue
        reasons[pos] = reason
        decided[pos] = True
    rejected = rejected_of(proposals, reasons) + rejected_of(
        proposals, dict.fromkeys(np.flatnonzero(~decided).tolist(), "not reviewed")
    )
    known = {ep.id for ep in ctx.state.endpoints}
    evidence = verdict.evidence
    unknown = set(evidence.endpoints).difference(known)
    if unknown:
        notes += [f"ledger move on unknown endpoint '{e}' dropped" for e in sorted(unknown)]
        evidence = evidence.where([e in known for e in evidence.endpoints])
    rest = _the_rest(verdict.rest, ctx, notes, deltas)
    review = Review.model_validate({"accepted": [], "rejected": rejected, **rest})
    return TickReview(review, np.flatnonzero(mask).tolist(), proposals, evidence)


def _the_rest(
    out: GovernanceOutput, ctx: ReviewContext, notes: list[str], deltas: list[Any]
) -> dict[str, Any]:
    """A review's parts beyond its decisions on proposals (``deltas`` holds the accepted
    proposals' deltas): pressure shifts, ledger moves, decision, reason (with ``notes`` of
    what was dropped), branches and forced values, each checked against the world."""
    state = ctx.state
    scored = {ep.id for ep in state.scored}
    known = {ep.id for ep in state.endpoints}
    for shift in out.pressure:
        if shift.endpoint not in scored or state.ledger[shift.endpoint].status != "open":
            notes.append(f"pressure on '{shift.endpoint}' dropped: not an open scored endpoint")
            continue
        deltas.append(ShiftPressure(endpoint=shift.endpoint, by=shift.by))

    ledger: list[dict[str, Any]] = []
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
            {"kind": move.evidence, "ref": move.ref or "review", "note": move.note}
            if move.evidence is not None
            else None
        )
        if status is not None or evidence is not None:
            ledger.append({"endpoint": move.endpoint, "status": status, "evidence": evidence})
    if realized is not None:
        moved = {u["endpoint"] for u in ledger if u["status"] is not None}
        for ep in state.scored:
            if ep.id != realized and ep.id not in moved and state.ledger[ep.id].status == "open":
                ledger.append({"endpoint": ep.id, "status": "eliminated", "evidence": None})
        ledger = [
            u
            for u in ledger
            if not (
                u["endpoint"] in scored and u["endpoint"] != realized and u["status"] == "realized"
            )
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
    return {
        "deltas": deltas,
        "ledger": ledger,
        "decision": "fork"
        if branches and out.decision != "terminate"
        else ("terminate" if out.decision == "terminate" else "continue"),
        "reason": reason,
        "branches": branches,
        "forced_p_yes": forced,
        "forced_probs": forced_probs,
    }


_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")
_SAFE = re.compile(r"[A-Za-z0-9.:-](?:[A-Za-z0-9_.:-]{0,78}[A-Za-z0-9.:-])?")
"""An id :func:`_slug` leaves as it is: safe characters only, no ``_`` at either end, at most
80 of them (a world of 10⁵ actors is mostly such ids)."""


def _slug(text: str, fallback: str, taken: set[str]) -> str:
    """A valid, unused id from whatever the model wrote."""
    safe = _SAFE.fullmatch(text) is not None
    base = text if safe else _UNSAFE.sub("_", text).strip("_")[:80] or fallback
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

    def agent_row(row: dict[str, Any], fallback: str, role: str) -> dict[str, Any]:
        new = _slug(row["id"], fallback, taken)
        renamed.setdefault(row["id"], new)
        role = _tick_role(row["role"], role, ctx.tick_roles, problems)
        return {**row, "id": new, "role": role}

    def agent_seed(item: InitActor | InitCohort, cls: type[Any], fallback: str, role: str) -> Any:
        return cls(**agent_row(item.model_dump(), fallback, role))

    # a world's actors validated together (one at a time costs about twice as much)
    rows = [
        agent_row(row, f"actor{i}", "actor")
        for i, row in enumerate(INIT_ACTORS.dump_python(list(out.actors)))
    ]
    actors = _actor_seeds(rows, ctx.card.seeds.actors if ctx.card.seeds else ())
    for i, a in enumerate(out.actors):
        if a.favours is not None and a.favours not in endpoints:
            problems.append(f"actor '{a.id}' favours unknown endpoint '{a.favours}': ignored")
            actors[i] = actors[i].model_copy(update={"favours": None})
    # how many members a cohort simulates is the card's choice, whoever built the world
    members = {c.id: c.members for c in (ctx.card.seeds.cohorts if ctx.card.seeds else ())}
    cohorts = [
        agent_seed(c, CohortSeed, f"cohort{i}", "cohort").model_copy(
            update={"members": members.get(c.id, 0)}
        )
        for i, c in enumerate(out.cohorts)
    ]
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


def _actor_seeds(rows: list[dict[str, Any]], own: Sequence[ActorSeed]) -> list[ActorSeed]:
    """The actor seeds of a world's rows: a row that is one of the card's own seeds as it
    dumps (the offline model's world, a model that kept the card's actors) is that seed,
    validated already; the others are validated together."""
    dumped = dict(zip([a.id for a in own], ACTOR_SEEDS.dump_python(list(own)), strict=True))
    seeds = {a.id: a for a in own}
    actors: list[ActorSeed | None] = [
        seeds[row["id"]] if dumped.get(row["id"]) == row else None for row in rows
    ]
    fresh = [i for i, actor in enumerate(actors) if actor is None]
    if fresh:
        try:
            made = ACTOR_SEEDS.validate_python([rows[i] for i in fresh])
        except ValidationError:  # the first that does not fit raises, as it would alone
            made = [ActorSeed(**rows[i]) for i in fresh]
        for i, actor in zip(fresh, made, strict=True):
            actors[i] = actor
    return [actor for actor in actors if actor is not None]


def _tick_role(name: str, default: str, known: frozenset[str], problems: list[str]) -> str:
    """``name`` if it is a runnable tick role, else ``default`` (with a problem noted)."""
    if name in known:
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
