"""Offline actor and cohort agents: seeded rule-based behaviour (docs/offline-model.md).

Every random draw comes from the generator the engine hands the agent for this timeline, tick and
agent, so an agent's behaviour does not depend on scheduling, and the number of draws does not
depend on the state (common random numbers keep comparisons between cards exact).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from worldsim.domain.outputs import ActorMove, ActorOutput
from worldsim.world.moves import Proposal
from worldsim.world.state import Edge, SetCohort, WorldState
from worldsim.world.views import TickContext

__all__ = ["OfflineActor", "OfflineCohort"]

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


class OfflineActor:
    """An actor with stance, influence and activity: pushes its endpoint by stance plus noise."""

    async def act(
        self, ctx: TickContext, hits: Sequence[Mapping[str, Any]] | None = None
    ) -> ActorOutput:
        """One move; ``hits`` are search results already found for this actor (else it searches)."""
        actor = ctx.state.actors[ctx.agent]
        noise = float(ctx.rng.normal(0.0, ACTOR_NOISE))
        # numpy's uniform(0.5, 1.0) draws 0.5 + 0.5 * random(): the same float, made faster
        vigour = 0.5 + 0.5 * float(ctx.rng.random())
        salience = 1.0 + EVENT_SALIENCE * len(ctx.observations)
        endpoint = _target_endpoint(ctx.state, actor.favours)
        title = ctx.state.endpoint(endpoint)
        push, cites = await _read_evidence(
            ctx, f"{actor.name} {title.title if title else ''}", hits
        )
        direction = _clip(actor.stance + noise + push, -1.0, 1.0)
        magnitude = _clip(actor.influence * vigour * salience, 0.0, 1.0)
        summary = f"{actor.name} {_verb(direction)} '{title.title if title else endpoint}'"
        move = ActorMove(
            kind="action",
            endpoint=endpoint,
            direction=direction,
            magnitude=magnitude,
            summary=summary[:300],
            cites=list(cites[:5]),
        )
        return ActorOutput(proposals=[move])


async def _read_evidence(
    ctx: TickContext, query: str, hits: Sequence[Mapping[str, Any]] | None = None
) -> tuple[float, tuple[str, ...]]:
    """Search the Temporal Gateway (unless ``hits`` were found already), open the first
    ``EVIDENCE_K`` hits, and average their stance hints.

    Returns the push toward yes and the ids of the documents read. Without a gateway (a card
    without evidence) there is nothing to read.
    """
    if ctx.tools is None:
        return 0.0, ()
    if hits is None:
        found = await ctx.tools.call("search_evidence", {"query": query, "k": EVIDENCE_K})
        hits = found.get("results", [])
    stances: list[float] = []
    read: list[str] = []
    for hit in list(hits)[:EVIDENCE_K]:
        opened = await ctx.tools.call("open_document", {"doc_id": hit["id"]})
        doc = opened.get("document")
        if doc is None:
            continue
        read.append(str(doc["id"]))
        if doc.get("stance") is not None:
            stances.append(float(doc["stance"]))
    push = EVIDENCE_WEIGHT * math.fsum(stances) / len(stances) if stances else 0.0
    return push, tuple(read)


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
        actor_ids = tuple(sorted(state.actors.keys()))
        sources = actor_ids + table.ids
        source_stance = np.concatenate(
            [np.array([state.actors[a].stance for a in actor_ids]), table.sentiment]
        )
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
