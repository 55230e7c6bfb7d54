"""World state with copy-on-write sharing (DESIGN §2, §4.4), its digest, and applying deltas.

A :class:`WorldState` is immutable. Its mappings are persistent hash-array-mapped tries
(:class:`immutables.Map`), its cohort columns are read-only numpy arrays that are replaced, never
written. Forking a timeline therefore shares the whole state in O(1), and a tick's changes cost in
proportion to what changed. The state's parts are in :mod:`worldsim.world.parts`, the deltas in
:mod:`worldsim.world.deltas`; both are re-exported here, the state's one face.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from immutables import Map
from pydantic import BaseModel

from worldsim.domain.errors import StateError
from worldsim.domain.jsonbytes import canonical_bytes
from worldsim.domain.memo import IdentityMemo
from worldsim.world.canonical import rendered
from worldsim.world.deltas import (
    Delta,
    EvidenceIn,
    LedgerUpdate,
    MemberAction,
    SetActor,
    SetCohort,
    SetHypothesis,
    SetPressure,
    SetVariable,
    ShiftPressure,
    UpdateMembers,
)
from worldsim.world.evidence import Evidence, EvidenceTrail
from worldsim.world.members import Members
from worldsim.world.members import update as update_members
from worldsim.world.parts import (
    Actor,
    ActorColumns,
    CohortTable,
    Edge,
    EndpointInfo,
    Hypothesis,
    LedgerRow,
    Scalar,
    ScheduledEvent,
    actor_columns,
)

__all__ = [
    "Actor",
    "ActorColumns",
    "CohortTable",
    "Delta",
    "Edge",
    "EndpointInfo",
    "Evidence",
    "EvidenceIn",
    "EvidenceTrail",
    "Hypothesis",
    "LedgerRow",
    "LedgerUpdate",
    "MemberAction",
    "Members",
    "Scalar",
    "ScheduledEvent",
    "SetActor",
    "SetCohort",
    "SetHypothesis",
    "SetPressure",
    "SetVariable",
    "ShiftPressure",
    "UpdateMembers",
    "WorldState",
    "actor_columns",
    "apply_review",
    "deliver_events",
    "state_digest",
]


_SCORED: IdentityMemo[tuple[EndpointInfo, ...]] = IdentityMemo(256)

# ----------------------------------------------------------------------------- world state


@dataclass(frozen=True, slots=True)
class WorldState:
    """Everything a timeline knows at a tick boundary."""

    endpoints: tuple[EndpointInfo, ...]
    actors: Map[str, Actor]
    cohorts: CohortTable
    edges: tuple[Edge, ...]
    constraints: tuple[str, ...]
    variables: Map[str, Scalar]
    pressure: Map[str, float]
    events: tuple[ScheduledEvent, ...]
    hypotheses: Map[str, Hypothesis]
    ledger: Map[str, LedgerRow]
    hazard: float

    # -- reading

    @property
    def scored(self) -> tuple[EndpointInfo, ...]:
        endpoints = self.endpoints  # the same tuple from state to state: picked once
        return _SCORED.get(
            "scored", endpoints, lambda: tuple(ep for ep in endpoints if ep.kind == "scored")
        )

    def endpoint(self, endpoint_id: str) -> EndpointInfo | None:
        return next((ep for ep in self.endpoints if ep.id == endpoint_id), None)

    def probabilities(self) -> dict[str, float]:
        """Softmax of the scored endpoints' pressure: the model's current outcome distribution."""
        ids = [ep.id for ep in self.scored]
        logits = [float(self.pressure[i]) for i in ids]
        top = max(logits)
        # Scalar libm and a correctly rounded sum: numpy's vector exp and reductions differ in
        # the last bit between CPUs, and these numbers reach the trace.
        weights = [math.exp(x - top) for x in logits]
        total = math.fsum(weights)
        return {i: w / total for i, w in zip(ids, weights, strict=True)}

    def tick_summary(self) -> dict[str, Any]:
        """What ``tick_committed`` records of the state beside its digest, each derived from it:
        the ledger's statuses, the pressure and ``p_yes_now`` (None on a card without a yes)."""
        yes = next((ep.id for ep in self.scored if ep.polarity == "yes"), None)
        return {
            "ledger": {key: row.status for key, row in sorted(self.ledger.items())},
            "pressure": {key: self.pressure[key] for key in sorted(self.pressure.keys())},
            "p_yes_now": self.probabilities()[yes] if yes is not None else None,
        }

    def outcome(self) -> str | None:
        """The settled outcome from the ledger: a polarity for binary cards, else an endpoint id."""
        scored = self.scored
        realized = [ep for ep in scored if self.ledger[ep.id].status == "realized"]
        if realized:
            ep = realized[0]
            return ep.polarity or ep.id
        still_open = [ep for ep in scored if self.ledger[ep.id].status == "open"]
        if len(still_open) == 1 and len(scored) > 1:
            ep = still_open[0]
            return ep.polarity or ep.id
        return None

    def all_scored_settled(self) -> bool:
        return all(self.ledger[ep.id].status != "open" for ep in self.scored)

    def events_at(self, tick: int) -> tuple[ScheduledEvent, ...]:
        return tuple(ev for ev in self.events if ev.tick == tick)

    # -- serialization

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoints": _endpoints_json(self.endpoints),
            "actors": [_actor_json(a) for a in sorted(self.actors.values(), key=lambda a: a.id)],
            "cohorts": self.cohorts.to_json(),
            "edges": _edges_json(self.edges),
            "constraints": list(self.constraints),
            "variables": {k: self.variables[k] for k in sorted(self.variables.keys())},
            "pressure": {k: self.pressure[k] for k in sorted(self.pressure.keys())},
            "events": _events_json(self.events),
            "hypotheses": self.to_json_hypotheses(),
            "ledger": {
                k: {
                    "status": row.status,
                    "settled_tick": row.settled_tick,
                    "evidence": [ev.to_json() for ev in row.evidence],
                }
                for k, row in sorted(self.ledger.items())
            },
            "hazard": self.hazard,
        }

    def to_json_hypotheses(self) -> list[dict[str, Any]]:
        return [
            {
                "id": h.id,
                "title": h.title,
                "endpoint": h.endpoint,
                "start_tick": h.start_tick,
                "end_tick": h.end_tick,
                "probability": h.probability,
                "impact": h.impact,
                "status": h.status,
            }
            for h in sorted(self.hypotheses.values(), key=lambda h: h.id)
        ]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorldState:
        return cls(
            endpoints=tuple(
                EndpointInfo(e["id"], e["title"], e["kind"], e["polarity"])
                for e in data["endpoints"]
            ),
            actors=Map({a["id"]: Actor(**a) for a in data["actors"]}),
            cohorts=CohortTable.from_json(data["cohorts"]),
            edges=tuple(Edge(**e) for e in data["edges"]),
            constraints=tuple(data["constraints"]),
            variables=Map(data["variables"]),
            pressure=Map({k: float(v) for k, v in data["pressure"].items()}),
            events=tuple(
                ScheduledEvent(
                    ev["id"],
                    ev["title"],
                    ev["tick"],
                    ev["description"],
                    tuple((str(k), float(v)) for k, v in ev["pressure"]),
                    tuple((str(k), v) for k, v in ev.get("variables", ())),
                )
                for ev in data["events"]
            ),
            hypotheses=Map({h["id"]: Hypothesis(**h) for h in data["hypotheses"]}),
            ledger=Map(
                {
                    k: LedgerRow(
                        status=row["status"],
                        settled_tick=row["settled_tick"],
                        evidence=EvidenceTrail(Evidence(**ev) for ev in row["evidence"]),
                    )
                    for k, row in data["ledger"].items()
                }
            ),
            hazard=float(data["hazard"]),
        )


def _endpoints_json(endpoints: Iterable[EndpointInfo]) -> list[dict[str, Any]]:
    return [
        {"id": e.id, "title": e.title, "kind": e.kind, "polarity": e.polarity} for e in endpoints
    ]


def _actor_json(a: Actor) -> dict[str, Any]:
    return {
        "id": a.id,
        "name": a.name,
        "kind": a.kind,
        "role": a.role,
        "stance": a.stance,
        "influence": a.influence,
        "activity": a.activity,
        "favours": a.favours,
    }


def _edges_json(edges: Iterable[Edge]) -> list[dict[str, Any]]:
    return [{"source": e.source, "target": e.target, "weight": e.weight} for e in edges]


def _events_json(events: Iterable[ScheduledEvent]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ev in events:
        data: dict[str, Any] = {
            "id": ev.id,
            "title": ev.title,
            "tick": ev.tick,
            "description": ev.description,
            "pressure": [[k, v] for k, v in ev.pressure],
        }
        if ev.variables:  # only then: a world without them keeps its digest
            data["variables"] = [[k, v] for k, v in ev.variables]
        out.append(data)
    return out


def deliver_events(state: WorldState, tick: int) -> WorldState:
    """``state`` with the variables its events of ``tick`` set, in event order (the engine
    calls it as a tick starts, replay likewise); the same object when they set none."""
    deltas = [
        SetVariable(name=name, value=value)
        for ev in state.events_at(tick)
        for name, value in ev.variables
    ]
    return apply_deltas(state, deltas) if deltas else state


def state_digest(state: WorldState) -> str:
    """SHA-256 of the state's canonical JSON; replay recomputes it at every committed tick.

    The value is ``sha256(canonical_bytes(state.to_json()))``, but the bytes are assembled from
    parts: those a tick leaves alone (actors, edges, events, endpoints) are the same objects a
    tick later and are rendered once (:func:`~worldsim.world.canonical.rendered`), and old
    ledger evidence keeps its bytes in its trail, hashed chunk by chunk. What remains per digest
    is the small parts and one pass of SHA-256.
    """
    parts: dict[str, bytes | list[bytes]] = {
        "actors": rendered("actors", state.actors, lambda: _actors_bytes(state.actors)),
        "cohorts": canonical_bytes(state.cohorts.to_json()),
        "constraints": canonical_bytes(list(state.constraints)),
        "edges": rendered("edges", state.edges, lambda: canonical_bytes(_edges_json(state.edges))),
        "endpoints": rendered(
            "endpoints", state.endpoints, lambda: canonical_bytes(_endpoints_json(state.endpoints))
        ),
        "events": rendered(
            "events", state.events, lambda: canonical_bytes(_events_json(state.events))
        ),
        "hazard": canonical_bytes(state.hazard),
        "hypotheses": canonical_bytes(state.to_json_hypotheses()),
        "ledger": _ledger_pieces(state.ledger),
        "pressure": canonical_bytes(dict(state.pressure.items())),
        "variables": canonical_bytes(dict(state.variables.items())),
    }
    digest = hashlib.sha256()
    separator = b"{"
    for key in sorted(parts):
        digest.update(separator + canonical_bytes(key) + b":")
        part = parts[key]
        for piece in part if isinstance(part, list) else (part,):
            digest.update(piece)
        separator = b","
    digest.update(b"}")
    return digest.hexdigest()


def _actors_bytes(actors: Map[str, Actor]) -> bytes:
    return canonical_bytes([_actor_json(actors[k]) for k in sorted(actors.keys())])


def _ledger_pieces(ledger: Map[str, LedgerRow]) -> list[bytes]:
    """The ledger's canonical JSON in pieces, to be hashed one after another: a row's evidence
    is most of it and grows every tick, and joining it into one string copied it several
    times for each digest."""
    pieces = [b"{"]
    for key, row in sorted(ledger.items()):
        if len(pieces) > 1:
            pieces.append(b",")
        pieces += (canonical_bytes(key), b':{"evidence":')
        pieces += row.evidence.canonical_pieces()
        pieces += (
            b',"settled_tick":',
            canonical_bytes(row.settled_tick),
            b',"status":',
            canonical_bytes(row.status),
            b"}",
        )
    pieces.append(b"}")
    return pieces


# ----------------------------------------------------------------------------- applying changes


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise StateError(f"{what} is not a finite number", field=what)
    return float(value)


def apply_deltas(state: WorldState, deltas: Iterable[BaseModel]) -> WorldState:
    """Apply state deltas in order; an invalid one raises :class:`StateError` naming it."""
    pressure = state.pressure
    actors = state.actors
    cohorts = state.cohorts
    variables = state.variables
    hypotheses = state.hypotheses
    scored_ids = {ep.id for ep in state.scored}
    for delta in deltas:
        if isinstance(delta, SetPressure | ShiftPressure):
            if delta.endpoint not in scored_ids:
                raise StateError(f"pressure on unknown scored endpoint '{delta.endpoint}'")
            if isinstance(delta, SetPressure):
                value = _finite(delta.value, "pressure")
            else:
                value = _finite(pressure[delta.endpoint] + delta.by, "pressure")
            pressure = pressure.set(delta.endpoint, min(50.0, max(-50.0, value)))
        elif isinstance(delta, SetActor):
            actor = actors.get(delta.id)
            if actor is None:
                raise StateError(f"unknown actor '{delta.id}'")
            value = _finite(delta.value, delta.field)
            lo = -1.0 if delta.field == "stance" else 0.0
            if not lo <= value <= 1.0:
                raise StateError(f"actor '{delta.id}' {delta.field} {value} out of range")
            if delta.field == "stance":
                actor = replace(actor, stance=value)
            elif delta.field == "influence":
                actor = replace(actor, influence=value)
            else:
                actor = replace(actor, activity=value)
            actors = actors.set(delta.id, actor)
        elif isinstance(delta, SetCohort):
            i = cohorts.index(delta.id)
            cohorts = cohorts.with_row(i, delta.attention, delta.trust, delta.sentiment)
        elif isinstance(delta, UpdateMembers):
            i = cohorts.index(delta.id)
            crowd = cohorts.members[i] if cohorts.members else None
            if crowd is None:
                raise StateError(f"cohort '{delta.id}' has no members", field="members")
            crowd = update_members(
                crowd,
                directions=[a.direction for a in delta.actions],
                magnitudes=[a.magnitude for a in delta.actions],
                probabilities=[a.probability for a in delta.actions],
                attention=delta.attention,
                trust=delta.trust,
                draw=delta.draw,
            )
            cohorts = cohorts.with_members(i, crowd)
        elif isinstance(delta, SetVariable):
            if isinstance(delta.value, float):
                _finite(delta.value, delta.name)
            variables = variables.set(delta.name, delta.value)
        elif isinstance(delta, SetHypothesis):
            hyp = hypotheses.get(delta.id)
            if hyp is None:
                raise StateError(f"unknown branch hypothesis '{delta.id}'")
            hypotheses = hypotheses.set(delta.id, replace(hyp, status=delta.status))
        else:  # pragma: no cover - the Delta union is closed
            raise StateError(f"unknown delta {type(delta).__name__}")
    return replace(
        state,
        pressure=pressure,
        actors=actors,
        cohorts=cohorts,
        variables=variables,
        hypotheses=hypotheses,
    )


def apply_ledger(state: WorldState, updates: Iterable[LedgerUpdate], tick: int) -> WorldState:
    """Apply ledger updates; moving a settled endpoint, or realizing two scored ones, is refused."""
    rows: dict[str, LedgerRow] = {}
    added: dict[str, list[Evidence]] = {}
    for upd in updates:
        row = rows.get(upd.endpoint) or state.ledger.get(upd.endpoint)
        if row is None:
            raise StateError(f"ledger update for unknown endpoint '{upd.endpoint}'")
        if upd.status is not None:
            if row.status != "open":
                raise StateError(
                    f"endpoint '{upd.endpoint}' is already {row.status}; "
                    f"cannot mark it {upd.status}"
                )
            row = replace(row, status=upd.status, settled_tick=tick)
        rows[upd.endpoint] = row
        if upd.evidence is not None:
            ev = Evidence(upd.evidence.kind, upd.evidence.ref, tick, upd.evidence.note)
            added.setdefault(upd.endpoint, []).append(ev)
    # one chunk per endpoint and apply: earlier evidence is shared, never copied
    ledger = state.ledger
    for endpoint, row in rows.items():
        ledger = ledger.set(
            endpoint, replace(row, evidence=row.evidence.added(added.get(endpoint, ())))
        )
    realized = [ep.id for ep in state.scored if ledger[ep.id].status == "realized"]
    if len(realized) > 1:
        raise StateError(f"more than one scored endpoint realized: {', '.join(realized)}")
    if state.scored and all(ledger[ep.id].status == "eliminated" for ep in state.scored):
        raise StateError("every scored endpoint eliminated")
    return replace(state, ledger=ledger)


def apply_review(
    state: WorldState, deltas: Iterable[BaseModel], ledger: Iterable[LedgerUpdate], tick: int
) -> WorldState:
    """A review's effect: state deltas first, then ledger updates."""
    return apply_ledger(apply_deltas(state, deltas), ledger, tick)
