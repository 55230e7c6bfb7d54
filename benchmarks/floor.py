"""The numpy floor of an offline run: the offline rules (docs/offline-model.md) vectorised over
arrays, each agent drawing from the engine's own generator, with no trace, no review records,
no gateway and no per-agent object.

It is what the engine's offline tick would cost if nothing but the model's arithmetic and its
seeded draws were paid for: the denominator of ``bench_columnar``'s engine ÷ floor ratio. Each
actor's evidence push (the stance hints of the documents its search finds) is the same every
tick; the floor takes it as given (:func:`evidence_pushes`, through the gateway, untimed).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import anyio
import numpy as np
import numpy.typing as npt

from worldsim.domain.cards import Card
from worldsim.domain.rng import AgentSeeds, rng_for
from worldsim.gateway import gateway_for_card
from worldsim.world.build import prior_pressure, tick_dates

__all__ = ["FloorRun", "evidence_pushes", "floor_run"]

ACTOR_NOISE, COHORT_NOISE, SALIENCE, EVIDENCE_WEIGHT = 0.35, 0.05, 0.3, 0.3
MEMORY, KAPPA, READ, SEARCH_K = 0.5, 1.0, 3, 5


@dataclass(frozen=True, slots=True)
class FloorRun:
    seconds: float
    cpu_seconds: float
    agent_steps: int
    ticks_run: int
    first_directions: list[float]
    """The first tick's actor directions, in id order (to check against the engine's)."""


def evidence_pushes(card: Card) -> dict[str, float]:
    """Each actor's push from what it reads: its search for its name and the question, the
    first three hits opened, ``0.3 ·`` the mean stance hint of those that carry one."""
    seeds = card.seeds
    assert seeds is not None
    ids = sorted(a.id for a in seeds.actors)
    names = {a.id: a.name for a in seeds.actors}

    async def go() -> dict[str, float]:
        async with gateway_for_card(card) as gateway:
            found = await gateway.search_batch(
                ids, [f"{names[a]} {card.question}" for a in ids], SEARCH_K
            )
            reads = [hits[:READ] for hits in found]
            docs = await gateway.read_batch(ids, reads)
        pushes: dict[str, float] = {}
        for agent, read in zip(ids, reads, strict=True):
            stances = [
                float(d.stance) for d in (docs[i] for i in read) if d and d.stance is not None
            ]
            pushes[agent] = EVIDENCE_WEIGHT * math.fsum(stances) / len(stances) if stances else 0
        return pushes

    return anyio.run(go)


def floor_run(card: Card, pushes: Mapping[str, float], *, ticks: int, seed: int) -> FloorRun:
    """One timeline of the offline model (``no_branch``) from the card's seeds, timed from the
    card to the last tick: world arrays built, then per tick the activity draws, each agent's
    generator and its two draws, the moves, the cohorts' update, the pressure and the hazard."""
    start, cpu = time.perf_counter(), time.process_time()
    seeds = card.seeds
    assert seeds is not None
    actors = sorted(seeds.actors, key=lambda a: a.id)
    ids = [a.id for a in actors]
    stance = np.array([a.stance for a in actors])
    influence = np.array([a.influence for a in actors])
    activity = np.array([a.activity for a in actors])
    push = np.array([pushes[a] for a in ids])
    yes = next(ep.id for ep in card.scored_endpoints if ep.polarity == "yes")
    to_yes = np.array([a.favours in (None, yes) for a in actors])
    cohort_ids = [c.id for c in seeds.cohorts]
    attention = np.array([c.attention for c in seeds.cohorts])
    trust = np.array([c.trust for c in seeds.cohorts])
    sentiment = np.array([c.sentiment for c in seeds.cohorts])
    weight = np.array([c.size for c in seeds.cohorts], dtype=float)
    weight /= weight.max()
    influence_on = _influence(card, ids, cohort_ids)
    prior = prior_pressure(card)
    scored = [ep.id for ep in card.scored_endpoints]
    x0 = np.array([prior[e] for e in scored])
    x = x0.copy()
    dates = tick_dates(card, ticks)
    events = [0] * ticks
    for event in seeds.events:
        k = bisect.bisect_right(dates, event.date) - 1
        if 0 <= k < ticks and event.date < card.deadline:
            events[k] += 1
    world = len(ids) + len(cohort_ids)
    steps, first, ran = 0, [], 0
    for k in range(ticks):
        ran += 1
        salience = 1.0 + SALIENCE * events[k]
        acting = np.flatnonzero(rng_for(seed, "activity", "t0", k).random(len(ids)) < activity)
        agents = [ids[i] for i in acting]
        noise, vigour = np.empty(len(agents)), np.empty(len(agents))
        for i, rng in enumerate(AgentSeeds(seed, "agent", "t0", k, agents)):
            noise[i] = rng.normal(0.0, ACTOR_NOISE)
            vigour[i] = rng.random()
        direction = np.clip(stance[acting] + noise + push[acting], -1.0, 1.0)
        magnitude = np.clip(influence[acting] * (0.5 + 0.5 * vigour) * salience, 0.0, 1.0)
        if k == 0:
            first = direction.tolist()
        # cohorts: toward their influencers' weighted stance, scaled by attention · trust
        target = influence_on @ np.concatenate([stance, sentiment])
        target = np.where(influence_on.sum(axis=1) > 0, target, sentiment)
        shaken = AgentSeeds(seed, "agent", "t0", k, cohort_ids)
        shocks = [rng.normal(0.0, COHORT_NOISE) for rng in shaken]
        attention = np.clip(
            attention + 0.1 * (0.5 - attention) + SALIENCE * events[k] * (1 - attention), 0, 1
        )
        sentiment = np.clip(
            sentiment + 0.5 * attention * trust * (target - sentiment) + np.array(shocks), -1, 1
        )
        pushed = direction * magnitude
        cohort_push = sentiment * np.clip(attention * (0.25 + 0.75 * weight), 0, 1)
        s_yes = pushed[to_yes[acting]].sum() + cohort_push.sum()
        s = np.array([s_yes if e == yes else 0.0 for e in scored])
        x = x0 + MEMORY * (x - x0) + (1 - MEMORY) * KAPPA * s / world
        np.count_nonzero(np.abs(pushed) >= 0.1)  # the ledger's entries
        steps += len(agents) + len(cohort_ids)
        resolves = rng_for(seed, "review", "t0", k).random() < seeds.hazard
        if resolves and k < ticks - 1:
            break
    return FloorRun(time.perf_counter() - start, time.process_time() - cpu, steps, ran, first)


def _influence(card: Card, ids: list[str], cohorts: list[str]) -> npt.NDArray[np.float64]:
    """Row-normalised influence onto each cohort from actors and cohorts."""
    seeds = card.seeds
    assert seeds is not None
    col = {s: j for j, s in enumerate(ids + cohorts)}
    row = {c: i for i, c in enumerate(cohorts)}
    w = np.zeros((len(cohorts), len(col)))
    for r in seeds.relations:
        if r.target in row and r.source in col:
            w[row[r.target], col[r.source]] += r.weight
    totals = w.sum(axis=1, keepdims=True)
    np.divide(w, totals, out=w, where=totals > 0)
    return w
