"""Building a world: a card's seeds (or a documented generic world) → the initial state, and the
simulated calendar of its ticks."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

from immutables import Map

from worldsim.domain.cards import ActorSeed, Card, CohortSeed, HypothesisSeed, RelationSeed, Seeds
from worldsim.world.state import (
    Actor,
    CohortTable,
    Edge,
    EndpointInfo,
    Hypothesis,
    LedgerRow,
    ScheduledEvent,
    WorldState,
)

__all__ = [
    "WorldSource",
    "build_world",
    "generic_seeds",
    "own_world_source",
    "prior_of",
    "prior_pressure",
    "spread_dates",
    "tick_dates",
    "tick_of",
    "world_seeds",
]


def tick_of(card: Card, ticks: int, when: datetime) -> int:
    """The tick whose interval ``[as_of + kΔ, as_of + (k+1)Δ)`` holds ``when`` (may be outside)."""
    span = (card.deadline - card.as_of).total_seconds()
    return math.floor((when - card.as_of).total_seconds() / (span / ticks))


WorldSource = Literal["seeds", "generic", "model", "role", "none"]
"""Where a run's initial world came from: the card's own ``seeds``; the documented ``generic``
world (a card without seeds on the offline route, or whose initializer call failed); a
``model``'s reading of the card (the initializer role on a model route); a Python initializer
``role``; ``none`` for a direct forecast, which has no world."""


def tick_dates(card: Card, ticks: int) -> list[datetime]:
    """Each tick's simulated date: the start of its interval. Never the wall clock."""
    return spread_dates(card.as_of, card.deadline, ticks)


def spread_dates(start: datetime, end: datetime, ticks: int) -> list[datetime]:
    """The starts of ``ticks`` equal intervals from ``start`` to ``end`` (none for 0 ticks)."""
    step = (end - start) / ticks if ticks else None
    return [start + k * step for k in range(ticks)] if step is not None else []


def generic_seeds(card: Card) -> Seeds:
    """The documented generic world for a card without seeds (docs/offline-model.md)."""
    scored = card.scored_endpoints
    yes = card.yes_endpoint
    target = yes.id if yes else scored[0].id
    other = next(ep.id for ep in scored if ep.id != target)
    return Seeds(
        base_rate=0.5 if card.kind == "binary" else None,
        base_rates=None if card.kind == "binary" else {ep.id: 1 / len(scored) for ep in scored},
        hazard=0.2,
        actors=(
            ActorSeed(
                id="decision_maker", name="Decision maker", stance=0.0, influence=0.9, activity=0.7
            ),
            ActorSeed(id="proponents", name="Proponents", stance=0.5, influence=0.5, activity=0.6),
            ActorSeed(id="opponents", name="Opponents", stance=-0.5, influence=0.5, activity=0.6),
        ),
        cohorts=(
            CohortSeed(id="public", name="General public", size=10_000, attention=0.3, trust=0.5),
            CohortSeed(id="experts", name="Domain experts", size=200, attention=0.8, trust=0.7),
        ),
        relations=(
            RelationSeed(source="proponents", target="public", weight=0.5),
            RelationSeed(source="opponents", target="public", weight=0.5),
            RelationSeed(source="decision_maker", target="experts", weight=0.8),
        ),
        hypotheses=(
            HypothesisSeed(
                id="breakthrough",
                title="A decisive development favours the outcome",
                endpoint=target,
                probability=0.2,
                impact=1.5,
            ),
            HypothesisSeed(
                id="setback",
                title="A setback works against the outcome",
                endpoint=other,
                probability=0.2,
                impact=1.5,
            ),
        ),
    )


def world_seeds(card: Card) -> Seeds:
    """The seeds a card's world is built from: its own when they describe a world (agents,
    relations, events or hypotheses); else the generic world around the card's prior — the base
    rates, hazard, variables and constraints its seeds give, if any."""
    seeds = card.seeds
    if seeds is not None and not _prior_only(seeds):
        return seeds
    generic = generic_seeds(card)
    if seeds is None:
        return generic
    kept = {"hazard", "variables", "constraints", "prior_source"}
    if card.kind == "binary" and seeds.base_rate is not None:
        kept.add("base_rate")
    if seeds.base_rates is not None:
        kept.add("base_rates")
    return generic.model_copy(update={name: getattr(seeds, name) for name in kept})


def own_world_source(card: Card) -> WorldSource:
    """Where a card's world comes from without a model: ``seeds`` when its seeds describe a
    world, else ``generic`` (the generic world, around the card's prior if it gives one)."""
    return "seeds" if card.seeds is not None and not _prior_only(card.seeds) else "generic"


def _prior_only(seeds: Seeds) -> bool:
    return not (
        seeds.actors or seeds.cohorts or seeds.relations or seeds.events or seeds.hypotheses
    )


def prior_of(card: Card) -> str:
    """Where the card's prior comes from, for the audit: its seeds' ``prior_source`` when
    given, else its seeds' base rates, else the generic world's."""
    seeds = card.seeds
    given = seeds is not None and (seeds.base_rate is not None or seeds.base_rates is not None)
    if seeds is not None and seeds.prior_source:
        return seeds.prior_source
    if given and seeds is not None:
        if card.kind == "binary" and seeds.base_rate is not None:
            return f"the card's seeds: base_rate {seeds.base_rate:g}"
        return "the card's seeds: base_rates"
    return "none given: " + ("0.5" if card.kind == "binary" else "uniform over the outcomes")


def prior_pressure(card: Card) -> dict[str, float]:
    """The scored endpoints' pressure before anything happens: the card's base rate as logits.

    Binary: ``x_yes = ½·logit(b)``, ``x_no = −½·logit(b)``; multiple choice: ``x_k = ln b_k``. A
    card without seeds gets the generic world's rates (0.5, or uniform).
    """
    seeds = card.seeds
    scored = card.scored_endpoints
    if seeds is None and card.kind != "binary":  # the generic world's uniform base rates
        return {ep.id: math.log(1 / len(scored)) for ep in scored}
    if seeds is not None and seeds.base_rates is not None:
        return {ep.id: math.log(seeds.base_rates[ep.id]) for ep in scored}
    rate = seeds.base_rate if seeds is not None and seeds.base_rate is not None else 0.5
    if card.kind == "binary":
        half = 0.5 * math.log(rate / (1.0 - rate))
        return {ep.id: half if ep.polarity == "yes" else -half for ep in scored}
    return {ep.id: 0.0 for ep in scored}


def build_world(card: Card, ticks: int) -> tuple[WorldState, list[str]]:
    """The initial world state and the problems met while building it (for the audit vector)."""
    seeds = world_seeds(card)
    problems: list[str] = []
    endpoints = tuple(EndpointInfo(ep.id, ep.title, ep.kind, ep.polarity) for ep in card.endpoints)
    scored = [ep for ep in endpoints if ep.kind == "scored"]
    pressure = prior_pressure(card)

    actors = Map(
        {
            a.id: Actor(a.id, a.name, a.kind, a.role, a.stance, a.influence, a.activity, a.favours)
            for a in seeds.actors
        }
    )
    cohorts = CohortTable.build([c.model_dump() for c in seeds.cohorts])
    edges = tuple(Edge(r.source, r.target, r.weight) for r in seeds.relations)

    yes_id = next((ep.id for ep in scored if ep.polarity == "yes"), None)
    events: list[ScheduledEvent] = []
    for ev in sorted(seeds.events, key=lambda e: (e.date, e.id)):
        k = tick_of(card, ticks, ev.date)
        if not 0 <= k < ticks:
            problems.append(f"event '{ev.id}' is dated outside [as_of, deadline) and is dropped")
            continue
        if isinstance(ev.pressure, dict):
            shift = tuple(sorted((str(e), float(v)) for e, v in ev.pressure.items()))
        elif ev.pressure and yes_id is not None:
            shift = ((yes_id, float(ev.pressure)),)
        else:
            if ev.pressure:
                problems.append(f"event '{ev.id}': a bare pressure needs a binary card")
            shift = ()
        events.append(ScheduledEvent(ev.id, ev.title, k, ev.description, shift))

    hypotheses: dict[str, Hypothesis] = {}
    for h in seeds.hypotheses:
        start = 0 if h.start is None else max(0, tick_of(card, ticks, h.start))
        end = ticks - 1 if h.end is None else min(ticks - 1, tick_of(card, ticks, h.end))
        if start > end:
            problems.append(f"hypothesis '{h.id}' has an empty window and never fires")
        hypotheses[h.id] = Hypothesis(
            h.id, h.title, h.endpoint, start, end, h.probability, h.impact
        )

    state = WorldState(
        endpoints=endpoints,
        actors=actors,
        cohorts=cohorts,
        edges=edges,
        constraints=tuple(seeds.constraints),
        variables=Map(dict(seeds.variables)),
        pressure=Map(pressure),
        events=tuple(events),
        hypotheses=Map(hypotheses),
        ledger=Map({ep.id: LedgerRow() for ep in endpoints}),
        hazard=seeds.hazard,
    )
    if not seeds.actors and not seeds.cohorts:
        problems.append("the world has no actors and no cohorts")
    return state, problems
