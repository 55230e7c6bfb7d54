"""Offline actor and cohort agents: seeded rule-based behaviour (docs/offline-model.md).

Every random draw comes from the generator the engine hands the agent for this timeline, tick and
agent, so an agent's behaviour does not depend on scheduling, and the number of draws does not
depend on the state (common random numbers keep comparisons between cards exact).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from worldsim.domain.errors import ConfigError
from worldsim.gateway import AgentTools, DocumentView, Gateway
from worldsim.world.moves import PROPOSALS, Proposal
from worldsim.world.state import Actor, Edge, SetCohort, WorldState, actor_columns
from worldsim.world.views import TickBatch, TickContext

__all__ = ["OfflineCohort", "batch_of_one", "offline_actors"]

ACTOR_NOISE = 0.35
COHORT_NOISE = 0.05
EVENT_SALIENCE = 0.3
#: How far the mean stance hint of the documents an actor reads moves its direction.
EVIDENCE_WEIGHT = 0.3
EVIDENCE_K = 3


def _target_endpoint(state: WorldState, favours: str | None) -> str:
    if favours is not None:
        return favours
    scored = state.scored
    return next((ep.id for ep in scored if ep.polarity == "yes"), scored[0].id)


def _clip(value: float, low: float, high: float) -> float:
    """``np.clip`` of one float (the same value, without an array round trip)."""
    return min(max(value, low), high)


def _verb(direction: float) -> str:
    if direction > 0.5:
        return "pushes hard for"
    if direction > 0.1:
        return "leans toward"
    if direction >= -0.1:
        return "stays neutral on"
    if direction >= -0.5:
        return "leans against"
    return "pushes hard against"


async def offline_actors(
    batch: TickBatch, found: Sequence[Sequence[str]] | None = None
) -> list[Proposal]:
    """One move for each of a tick's actors (``batch.agents``): its stance plus noise, pushed
    by the stance hints of the documents it reads, toward its endpoint.

    ``found[i]`` are the ids of the hits a search found for agent ``i`` already (its prompt
    role searched for it); without them each actor searches for its name and its endpoint's
    title. Each reads the first ``EVIDENCE_K``. The gateway takes the whole tick's searches and
    reads at once, logged under each agent in its call order, so a tick decided together is
    the same as its actors decided one at a time.
    """
    state = batch.state
    salience = 1.0 + EVENT_SALIENCE * len(batch.observations)
    aims: dict[str | None, tuple[str, str | None]] = {}  # favours -> endpoint, its title
    targets: list[tuple[Actor, str, str | None]] = []
    for agent in batch.agents:
        actor = state.actors[agent]
        aim = aims.get(actor.favours)
        if aim is None:
            endpoint = _target_endpoint(state, actor.favours)
            info = state.endpoint(endpoint)
            aim = aims[actor.favours] = (endpoint, info.title if info else None)
        targets.append((actor, *aim))
    evidence = await _read_evidence(batch, targets, found)
    moves: list[dict[str, Any]] = []  # validated together
    for i, (actor, endpoint, title) in enumerate(targets):
        rng = batch.rngs[i]
        noise = float(rng.normal(0.0, ACTOR_NOISE))
        # numpy's uniform(0.5, 1.0) draws 0.5 + 0.5 * random(): the same float, made faster
        vigour = 0.5 + 0.5 * float(rng.random())
        push, cites = evidence[i]
        direction = _clip(actor.stance + noise + push, -1.0, 1.0)
        magnitude = _clip(actor.influence * vigour * salience, 0.0, 1.0)
        summary = f"{actor.name} {_verb(direction)} '{title if title is not None else endpoint}'"
        moves.append(
            {
                "agent": batch.agents[i],
                "kind": "action",
                "endpoint": endpoint,
                "direction": direction,
                "magnitude": magnitude,
                "summary": summary[:300],
                "cites": cites[:5],
            }
        )
    return PROPOSALS.validate_python(moves)


def batch_of_one(ctx: TickContext) -> TickBatch:
    """One agent's view as a batch of one (its generator, the gateway behind its tools)."""
    tools = ctx.tools
    if tools is not None and not isinstance(tools, AgentTools):
        raise ConfigError(
            f"agent '{ctx.agent}': the offline actor reads evidence through the gateway's "
            f"tools, not a {type(tools).__name__}",
            field="tools",
        )
    return TickBatch(
        card=ctx.card,
        timeline=ctx.timeline,
        tick=ctx.tick,
        ticks=ctx.ticks,
        date=ctx.date,
        agents=(ctx.agent,),
        state=ctx.state,
        observations=ctx.observations,
        rngs=(ctx.rng,),
        gateway=tools.gateway if tools is not None else None,
    )


async def _read_evidence(
    batch: TickBatch,
    targets: Sequence[tuple[Actor, str, str | None]],
    found: Sequence[Sequence[str]] | None,
) -> list[tuple[float, tuple[str, ...]]]:
    """For each agent: search the Temporal Gateway (unless ``found``), open the first
    ``EVIDENCE_K`` hits and average their stance hints.

    Gives each agent's push toward yes and the ids of the documents it read. Without a gateway
    (a card without evidence) there is nothing to read.
    """
    gateway: Gateway | None = batch.gateway
    if gateway is None:
        return [(0.0, ())] * len(batch.agents)
    timeline, tick = batch.timeline, batch.tick
    if found is None:
        queries = [
            (agent, f"{actor.name} {title or ''}")
            for agent, (actor, _, title) in zip(batch.agents, targets, strict=True)
        ]
        hits = await gateway.search_each(queries, EVIDENCE_K, timeline=timeline, tick=tick)
        found = [[hit.id for hit in agent_hits] for agent_hits in hits]
    wanted = [tuple(ids[:EVIDENCE_K]) for ids in found]
    reads = [(agent, i) for agent, ids in zip(batch.agents, wanted, strict=True) for i in ids]
    opened = await gateway.open_each(reads, timeline=timeline, tick=tick)
    # what reading a list of documents gives is the same for every agent of the call that
    # reads that list (the same documents, refused or not): worked out once per list
    evidence: list[tuple[float, tuple[str, ...]]] = []
    pushes: dict[tuple[str, ...], tuple[float, tuple[str, ...]]] = {}
    at = 0
    for ids in wanted:
        pushed = pushes.get(ids)
        if pushed is None:
            pushed = pushes[ids] = _pushed(opened[at : at + len(ids)])
        evidence.append(pushed)
        at += len(ids)
    return evidence


def _pushed(docs: Sequence[DocumentView | None]) -> tuple[float, tuple[str, ...]]:
    """The push of the documents an agent read (the mean of their stance hints, weighted) and
    the ids of those it received."""
    read = tuple(doc.id for doc in docs if doc is not None)
    stances = [float(doc.stance) for doc in docs if doc is not None and doc.stance is not None]
    return (EVIDENCE_WEIGHT * math.fsum(stances) / len(stances) if stances else 0.0), read


@lru_cache(maxsize=64)
def _influence(
    edges: tuple[Edge, ...], sources: tuple[str, ...], targets: tuple[str, ...]
) -> npt.NDArray[np.float64]:
    """Row-normalised influence matrix from ``sources`` (actors, cohorts) onto cohorts."""
    col = {s: j for j, s in enumerate(sources)}
    row = {t: i for i, t in enumerate(targets)}
    w = np.zeros((len(targets), len(sources)))
    for e in edges:
        if e.target in row and e.source in col:
            w[row[e.target], col[e.source]] += e.weight
    # Row sums correctly rounded (math.fsum): numpy's reductions differ in the last bit
    # between CPUs, and these weights reach the trace.
    totals = np.array([[math.fsum(row)] for row in w.tolist()]).reshape(len(targets), 1)
    np.divide(w, totals, out=w, where=totals > 0)
    w.setflags(write=False)
    return w


class OfflineCohort:
    """A population segment: sentiment drifts toward its influencers, scaled by attention·trust."""

    name = "cohort"
    phase = "tick"

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        state = ctx.state
        table = state.cohorts
        i = table.index(ctx.agent)
        actors = actor_columns(state.actors)
        sources = actors.ids + table.ids
        source_stance = np.concatenate([actors.stance, table.sentiment])
        w = _influence(state.edges, sources, table.ids)
        has_influence = math.fsum(w[i].tolist()) > 0
        target = (
            math.fsum((w[i] * source_stance).tolist())
            if has_influence
            else float(table.sentiment[i])
        )

        noise = float(ctx.rng.normal(0.0, COHORT_NOISE))
        attention = float(table.attention[i])
        attention = float(
            np.clip(
                attention
                + 0.1 * (0.5 - attention)
                + EVENT_SALIENCE * len(ctx.observations) * (1.0 - attention),
                0.0,
                1.0,
            )
        )
        trust = float(table.trust[i])
        pull = 0.5 * attention * trust
        sentiment = float(table.sentiment[i])
        sentiment = float(np.clip(sentiment + pull * (target - sentiment) + noise, -1.0, 1.0))
        weight = float(table.size[i] / table.size.max())
        endpoint = _target_endpoint(state, None)
        return [
            Proposal(
                agent=ctx.agent,
                index=0,
                kind="cohort_update",
                endpoint=endpoint,
                direction=sentiment,
                magnitude=float(np.clip(attention * (0.25 + 0.75 * weight), 0.0, 1.0)),
                summary=f"{table.names[i]}: sentiment {sentiment:+.2f}, attention {attention:.2f}",
                deltas=(
                    SetCohort(id=ctx.agent, attention=attention, trust=trust, sentiment=sentiment),
                ),
            )
        ]
