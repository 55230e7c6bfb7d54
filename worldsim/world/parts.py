"""The parts of a world state (DESIGN §2): endpoints, actors and their columns, the influence
graph's edges, scheduled events, branch hypotheses, ledger rows and the cohort table.

Each is an immutable value; :class:`~worldsim.world.state.WorldState` holds them in persistent
maps and read-only arrays, so a fork shares them and a change replaces only what it touches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from immutables import Map

from worldsim.domain.bounds import MAX_MEMBERS
from worldsim.domain.errors import StateError
from worldsim.domain.memo import IdentityMemo
from worldsim.world.canonical import rendered
from worldsim.world.evidence import EvidenceTrail
from worldsim.world.members import Members
from worldsim.world.members import initial as members_initial
from worldsim.world.members import mean as members_mean

Scalar = float | int | str | bool
FloatArray = npt.NDArray[np.float64]


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
        return list(map(at.__getitem__, agents))


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
                    "sha256": members_digest(m),
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


def members_digest(members: Members) -> str:
    """The members' digest, computed once per (immutable) set of members."""
    return rendered("members", members, lambda: members.digest().encode()).decode()
