"""World state with copy-on-write sharing (DESIGN §2, §4.4) and the deltas that change it.

A :class:`WorldState` is immutable. Its mappings are persistent hash-array-mapped tries
(:class:`immutables.Map`), its cohort columns are read-only numpy arrays that are replaced, never
written. Forking a timeline therefore shares the whole state in O(1), and a tick's changes cost in
proportion to what changed. Deltas are pydantic models because they cross boundaries: reviewers
produce them, the trace records them, replay applies them again through the same code.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from immutables import Map
from pydantic import BaseModel, ConfigDict, Field

from worldsim.domain.bounds import MAX_MEMBERS
from worldsim.domain.errors import StateError
from worldsim.domain.jsonbytes import canonical_bytes
from worldsim.domain.memo import IdentityMemo
from worldsim.world.canonical import rendered
from worldsim.world.evidence import Evidence, EvidenceTrail
from worldsim.world.members import Members
from worldsim.world.members import initial as members_initial
from worldsim.world.members import mean as members_mean
from worldsim.world.members import update as update_members

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

Scalar = float | int | str | bool
FloatArray = npt.NDArray[np.float64]


# ----------------------------------------------------------------------------- value objects


@dataclass(frozen=True, slots=True)
class EndpointInfo:
    id: str
    title: str
    kind: Literal["scored", "auxiliary"]
    polarity: Literal["yes", "no"] | None


@dataclass(frozen=True, slots=True)
class Actor:
    id: str
    name: str
    kind: str
    role: str
    stance: float
    influence: float
    activity: float
    favours: str | None = None


@dataclass(frozen=True, slots=True)
class ActorColumns:
    """An actor map's actors in id order, as columns (the arrays read-only): what a tick's
    activation draws and the offline cohorts read of every actor (:func:`actor_columns`)."""

    ids: tuple[str, ...]
    roles: tuple[str, ...]
    stance: FloatArray
    activity: FloatArray
    influence: FloatArray
    names: tuple[str, ...]
    favours: tuple[str | None, ...]

    def rows(self, agents: Sequence[str]) -> list[int]:
        """The rows of the given actors."""
        at = _ROWS.get("rows", self, lambda: dict(zip(self.ids, range(len(self.ids)), strict=True)))
        return [at[a] for a in agents]


#: Columns per actor map: a timeline's ticks share one until a delta moves an actor.
_COLUMNS: IdentityMemo[ActorColumns] = IdentityMemo(16)
_ROWS: IdentityMemo[dict[str, int]] = IdentityMemo(16)


def actor_columns(actors: Map[str, Actor]) -> ActorColumns:
    """The columns of ``actors``, made once per actor map."""

    def make() -> ActorColumns:
        ids = tuple(sorted(actors.keys()))
        rows = [actors[a] for a in ids]
        stance = _frozen(a.stance for a in rows)
        activity = _frozen(a.activity for a in rows)
        influence = _frozen(a.influence for a in rows)
        return ActorColumns(
            ids,
            tuple(a.role for a in rows),
            stance,
            activity,
            influence,
            tuple(a.name for a in rows),
            tuple(a.favours for a in rows),
        )

    return _COLUMNS.get("columns", actors, make)


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    weight: float


@dataclass(frozen=True, slots=True)
class ScheduledEvent:
    """An event delivered at ``tick``: its agents observe it, the reviewer applies its pressure,
    and its ``variables`` are set in the world as the tick starts (`deliver_events`)."""

    id: str
    title: str
    tick: int
    description: str
    pressure: tuple[tuple[str, float], ...]
    variables: tuple[tuple[str, Scalar], ...] = ()


@dataclass(frozen=True, slots=True)
class Hypothesis:
    id: str
    title: str
    endpoint: str
    start_tick: int
    end_tick: int
    probability: float
    impact: float
    status: Literal["open", "fired"] = "open"


_NO_EVIDENCE = EvidenceTrail()
_SCORED: IdentityMemo[tuple[EndpointInfo, ...]] = IdentityMemo(256)


@dataclass(frozen=True, slots=True)
class LedgerRow:
    status: Literal["open", "realized", "eliminated"] = "open"
    evidence: EvidenceTrail = _NO_EVIDENCE
    settled_tick: int | None = None


def _frozen(values: Iterable[float], dtype: type = np.float64) -> FloatArray:
    arr: FloatArray = np.array(list(values), dtype=dtype)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, slots=True)
class CohortTable:
    """Cohorts as columns: one read-only numpy array per attribute, one row per cohort."""

    ids: tuple[str, ...]
    names: tuple[str, ...]
    roles: tuple[str, ...]
    size: FloatArray
    attention: FloatArray
    trust: FloatArray
    sentiment: FloatArray

    members: tuple[Members | None, ...] = ()
    """Per row, the cohort's members as arrays (``None`` for a cohort without any)."""

    @classmethod
    def build(cls, rows: Sequence[Mapping[str, Any]]) -> CohortTable:
        table = cls(
            ids=tuple(str(r["id"]) for r in rows),
            names=tuple(str(r.get("name", r["id"])) for r in rows),
            roles=tuple(str(r.get("role", "cohort")) for r in rows),
            size=_frozen(float(r.get("size", 1)) for r in rows),
            attention=_frozen(float(r["attention"]) for r in rows),
            trust=_frozen(float(r["trust"]) for r in rows),
            sentiment=_frozen(float(r["sentiment"]) for r in rows),
        )
        if not any(r.get("members") for r in rows):
            return table
        crowds = tuple(
            members_initial(
                str(r["id"]),
                int(r["members"]),
                float(r["attention"]),
                float(r["trust"]),
                float(r["sentiment"]),
            )
            if r.get("members")
            else None
            for r in rows
        )
        # the row keeps the card's values (which the members are made from) until they update
        return replace(table, members=crowds)

    def index(self, cohort_id: str) -> int:
        try:
            return self.ids.index(cohort_id)
        except ValueError:
            raise StateError(f"unknown cohort '{cohort_id}'", field="cohort") from None

    def with_row(self, i: int, attention: float, trust: float, sentiment: float) -> CohortTable:
        """A copy with row ``i`` replaced; unchanged columns are shared, changed ones copied."""

        def put(col: FloatArray, value: float) -> FloatArray:
            if col[i] == value:
                return col
            new = col.copy()
            new[i] = value
            new.setflags(write=False)
            return new

        return replace(
            self,
            attention=put(self.attention, attention),
            trust=put(self.trust, trust),
            sentiment=put(self.sentiment, sentiment),
        )

    def with_members(self, i: int, members: Members) -> CohortTable:
        """A copy with row ``i``'s members replaced and its row set to their means."""
        crowds = list(self.members or (None,) * len(self.ids))
        crowds[i] = members
        table = replace(self, members=tuple(crowds))
        return table.with_row(
            i,
            members_mean(members.attention),
            members_mean(members.trust),
            members_mean(members.sentiment),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ids": list(self.ids),
            "names": list(self.names),
            "roles": list(self.roles),
            "size": self.size.tolist(),
            "attention": self.attention.tolist(),
            "trust": self.trust.tolist(),
            "sentiment": self.sentiment.tolist(),
        }
        if self.members:  # only then: a world without members keeps its digest
            data["members"] = [
                None
                if m is None
                else {
                    "count": len(m),
                    "sha256": _members_digest(m),
                }
                for m in self.members
            ]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CohortTable:
        recorded = data.get("members") or [None] * len(data["ids"])
        counts = [(m or {}).get("count", 0) for m in recorded]
        if any(not isinstance(c, int) or c < 0 for c in counts) or sum(counts) > MAX_MEMBERS:
            raise StateError(
                f"the cohorts' member counts are not {MAX_MEMBERS:,} or fewer in all",
                field="members",
            )
        rows = [
            {
                "id": cid,
                "name": data["names"][i],
                "role": data["roles"][i],
                "size": data["size"][i],
                "attention": data["attention"][i],
                "trust": data["trust"][i],
                "sentiment": data["sentiment"][i],
                "members": counts[i],
            }
            for i, cid in enumerate(data["ids"])
        ]
        table = cls.build(rows)
        # the members are made again from the card's values: they must be the ones recorded
        if table.to_json().get("members") != data.get("members"):
            raise StateError("the cohorts' members differ from those recorded", field="members")
        return table


# ----------------------------------------------------------------------------- deltas


class _Delta(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SetPressure(_Delta):
    """Set a scored endpoint's pressure (a logit; probabilities are its softmax)."""

    op: Literal["set_pressure"] = "set_pressure"
    endpoint: str = Field(max_length=80)
    value: float = Field(ge=-50.0, le=50.0)


class ShiftPressure(_Delta):
    """Add to a scored endpoint's pressure."""

    op: Literal["shift_pressure"] = "shift_pressure"
    endpoint: str = Field(max_length=80)
    by: float = Field(ge=-50.0, le=50.0)


class SetActor(_Delta):
    op: Literal["set_actor"] = "set_actor"
    id: str = Field(max_length=80)
    field: Literal["stance", "influence", "activity"]
    value: float


class SetCohort(_Delta):
    op: Literal["set_cohort"] = "set_cohort"
    id: str = Field(max_length=80)
    attention: float = Field(ge=0.0, le=1.0)
    trust: float = Field(ge=0.0, le=1.0)
    sentiment: float = Field(ge=-1.0, le=1.0)


class MemberAction(_Delta):
    """One action of a cohort's archetype: where it pulls a member, how hard, how likely."""

    direction: float = Field(ge=-1.0, le=1.0)
    magnitude: float = Field(ge=0.0, le=1.0)
    probability: float = Field(ge=0.0, le=1.0)


class UpdateMembers(_Delta):
    """A cohort archetype's decision, applied to every member of the cohort
    (:func:`worldsim.world.members.update`); the cohort's row becomes the members' means."""

    op: Literal["update_members"] = "update_members"
    id: str = Field(max_length=80)
    actions: tuple[MemberAction, ...] = Field(min_length=1, max_length=32)
    attention: float = Field(ge=0.0, le=1.0)
    trust: float = Field(ge=0.0, le=1.0)
    draw: int = Field(ge=0, lt=2**63, description="seed of the members' picks")


class SetVariable(_Delta):
    op: Literal["set_variable"] = "set_variable"
    name: str = Field(min_length=1, max_length=120)
    value: float | int | str | bool


class SetHypothesis(_Delta):
    op: Literal["set_hypothesis"] = "set_hypothesis"
    id: str = Field(max_length=80)
    status: Literal["open", "fired"]


Delta = Annotated[
    SetPressure
    | ShiftPressure
    | SetActor
    | SetCohort
    | UpdateMembers
    | SetVariable
    | SetHypothesis,
    Field(discriminator="op"),
]


class EvidenceIn(_Delta):
    kind: Literal["supports", "contradicts"]
    ref: str = Field(max_length=200)
    note: str = Field("", max_length=500)


class LedgerUpdate(_Delta):
    """A reviewer's change to one endpoint: a status move, an evidence entry, or both."""

    endpoint: str = Field(max_length=80)
    status: Literal["realized", "eliminated"] | None = None
    evidence: EvidenceIn | None = None


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


def _members_digest(members: Members) -> str:
    """The members' digest, computed once per (immutable) set of members."""
    return rendered("members", members, lambda: members.digest().encode()).decode()


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
