"""Offline actor and cohort agents: seeded rule-based behaviour (docs/offline-model.md).

Every random draw comes from the generator the engine hands the agent for this timeline, tick and
agent, so an agent's behaviour does not depend on scheduling, and the number of draws does not
depend on the state (common random numbers keep comparisons between cards exact).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from worldsim.domain.rng import AgentSeeds
from worldsim.gateway import DocumentView, Gateway
from worldsim.world.columns import MoveColumns
from worldsim.world.moves import Proposal
from worldsim.world.state import Edge, SetCohort, WorldState, actor_columns
from worldsim.world.views import TickBatch, TickContext

__all__ = ["OfflineCohort", "offline_moves"]

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


async def offline_moves(
    batch: TickBatch, found: Sequence[tuple[str, ...]] | None = None
) -> MoveColumns:
    """One move for each of a tick's actors (``batch.agents``), as columns: its stance plus
    noise, pushed by the stance hints of the documents it reads, toward its endpoint.

    ``found[i]`` are the ids of the hits a search found for agent ``i`` already (its prompt
    role searched for it); without them each actor searches for its name and its endpoint's
    title. Each reads the first ``EVIDENCE_K``. The gateway takes the whole tick's searches and
    reads at once, logged under each agent, and each agent draws from its own generator in the
    order it would alone, so a tick decided together is the same as its actors one at a time.
    """
    state = batch.state
    salience = 1.0 + EVENT_SALIENCE * len(batch.observations)
    columns = actor_columns(state.actors)
    rows = columns.rows(batch.agents)
    aims: dict[str | None, tuple[str, str | None]] = {}  # favours -> endpoint, its title
    for favours in {columns.favours[r] for r in rows}:
        endpoint = _target_endpoint(state, favours)
        info = state.endpoint(endpoint)
        aims[favours] = (endpoint, info.title if info is not None else None)
    targets = list(map(aims.__getitem__, map(columns.favours.__getitem__, rows)))
    names = list(map(columns.names.__getitem__, rows))
    pushes, cites = await _read_evidence(batch, names, targets, found)
    n = len(rows)
    rngs = batch.rngs
    generator = rngs.generator if isinstance(rngs, AgentSeeds) else rngs.__getitem__
    normal, vigour = np.empty(n), np.empty(n)
    for i in range(n):
        rng = generator(i)
        normal[i] = rng.standard_normal()
        vigour[i] = rng.random()
    # numpy's normal(0, s) draws 0 + s * standard_normal() and its uniform(0.5, 1.0) draws
    # 0.5 + 0.5 * random(): the same floats, made at once
    noise = 0.0 + ACTOR_NOISE * normal
    vigour = 0.5 + 0.5 * vigour
    direction = np.clip(columns.stance[rows] + noise + pushes, -1.0, 1.0)
    magnitude = np.clip(columns.influence[rows] * vigour * salience, 0.0, 1.0)
    verbs = _verbs(direction)
    return MoveColumns(
        agents=tuple(batch.agents),
        endpoints=[endpoint for endpoint, _ in targets],
        direction=direction,
        magnitude=magnitude,
        summaries=_summaries(names, verbs, targets),
        cites=[ids[:5] for ids in cites],
    ).checked()


def _summaries(
    names: list[str], verbs: list[str], targets: list[tuple[str, str | None]]
) -> list[str]:
    """Each actor's summary: its name, its verb and what it pushes, at most 300 characters
    (made by ``map``; cut only where one may be longer)."""
    shown = {aim: f"'{aim[1] if aim[1] is not None else aim[0]}'" for aim in set(targets)}
    made = list(map(" ".join, zip(names, verbs, map(shown.__getitem__, targets), strict=True)))
    longest = max(map(len, names), default=0) + max(map(len, shown.values()), default=0)
    if longest + max(map(len, _VERBS)) + 2 > 300:
        made = [summary[:300] for summary in made]
    return made


def _verbs(direction: npt.NDArray[np.float64]) -> list[str]:
    """:func:`_verb` of each direction."""
    picks = np.select(
        [direction > 0.5, direction > 0.1, direction >= -0.1, direction >= -0.5], [0, 1, 2, 3], 4
    )
    return list(map(_VERBS.__getitem__, picks.tolist()))


_VERBS = (
    "pushes hard for",
    "leans toward",
    "stays neutral on",
    "leans against",
    "pushes hard against",
)


async def _read_evidence(
    batch: TickBatch,
    names: Sequence[str],
    targets: Sequence[tuple[str, str | None]],
    found: Sequence[tuple[str, ...]] | None,
) -> tuple[npt.NDArray[np.float64], list[tuple[str, ...]]]:
    """For each agent: search the Temporal Gateway (unless ``found``), open the first
    ``EVIDENCE_K`` hits and average their stance hints.

    Gives each agent's push toward yes and the ids of the documents it read. Without a gateway
    (a card without evidence) there is nothing to read.
    """
    gateway: Gateway | None = batch.gateway
    n = len(batch.agents)
    if gateway is None:
        return np.zeros(n), [()] * n
    timeline, tick = batch.timeline, batch.tick
    if found is None:
        queries = [f"{name} {title or ''}" for name, (_, title) in zip(names, targets, strict=True)]
        found = await gateway.search_batch(
            batch.agents, queries, EVIDENCE_K, timeline=timeline, tick=tick
        )
    # agents whose searches found the same hits read the same list: worked out once per list
    lists: dict[tuple[str, ...], tuple[str, ...]] = {}
    wanted = [lists.get(ids) or lists.setdefault(ids, tuple(ids[:EVIDENCE_K])) for ids in found]
    opened = await gateway.read_batch(batch.agents, wanted, timeline=timeline, tick=tick)
    pushes: dict[tuple[str, ...], tuple[float, tuple[str, ...]]] = {}
    evidence = []
    for ids in wanted:
        pushed = pushes.get(ids)
        if pushed is None:
            pushed = pushes[ids] = _pushed([opened[d] for d in ids])
        evidence.append(pushed)
    return np.array([p for p, _ in evidence]), [c for _, c in evidence]


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
