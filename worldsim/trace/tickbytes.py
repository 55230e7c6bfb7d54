"""A tick's proposals and review written from their columns: each row's JSON made as bytes,
exactly as ``json.dumps`` writes the row's JSON form, without a dict per row; and what the run's
forecast graph keeps of those records (:class:`KeptProposals`, :class:`KeptAccepted`), handed to
it beside the data (:class:`Kept`) rather than read back from the bytes.

A tick of 10⁵ agents would otherwise make a few hundred thousand dicts and lists per record,
only to encode them once: their making cost about as much as their encoding, and their number
sent the collector over the whole of them several times a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from worldsim.domain.jsonbytes import compact_bytes, msgspec_bytes, odd_positions, raw_rows
from worldsim.world.columns import MoveColumns, TickReview

__all__ = [
    "Kept",
    "KeptAccepted",
    "KeptProposals",
    "as_index",
    "as_text",
    "proposal_rows",
    "review_payload",
]

_json = msgspec_bytes
"""JSON of strings, ints, ``None`` and lists of them: the standard library's bytes."""

_PROPOSAL = (
    b'{"agent":%b,"index":0,"kind":%b,"endpoint":%b,"direction":%b,"magnitude":%b,'
    b'"summary":%b,"deltas":[],"cites":%b,"role":%b,"unretrieved_citations":%b}'
)
_ACCEPTED = b'{"agent":%b,"index":%d}'
_EVIDENCE = b'{"endpoint":%b,"status":null,"evidence":{"kind":%b,"ref":%b,"note":%b}}'


class Kept(dict[str, Any]):
    """A record's JSON data as written, with ``kept``: what the forecast graph keeps of it,
    made from the columns the data was written from (its rows are bytes the graph cannot
    read back without parsing them)."""

    kept: Mapping[str, Any]

    @classmethod
    def of(cls, data: Mapping[str, Any], kept: Mapping[str, Any]) -> Kept:
        made = cls(data)
        made.kept = kept
        return made


class KeptProposals(dict[str, Any]):
    """A tick's proposals as a run keeps them for its graph: agent, index, summary and cites,
    a column each (the record's data is not held)."""

    columns: tuple[list[str], list[int], list[str], list[Sequence[str]]]

    @classmethod
    def of(cls, items: Sequence[Mapping[str, Any]]) -> KeptProposals:
        """The columns of a ``proposals`` record's items in their JSON form."""
        return cls.from_columns(
            [as_text(p.get("agent", "")) for p in items],
            [as_index(p.get("index")) for p in items],
            [p.get("summary", "") for p in items],
            [p.get("cites") or () for p in items],
        )

    @classmethod
    def from_columns(
        cls,
        agents: list[str],
        indexes: list[int],
        summaries: list[str],
        cites: list[Sequence[str]],
    ) -> KeptProposals:
        kept = cls()
        kept.columns = (agents, indexes, summaries, cites)
        return kept


class KeptAccepted:
    """A review's accepted references as a run keeps them: agents and indexes."""

    __slots__ = ("agents", "indexes")

    def __init__(self, agents: list[str], indexes: list[int]) -> None:
        self.agents, self.indexes = agents, indexes

    @classmethod
    def of(cls, items: Iterable[Any]) -> KeptAccepted:
        refs = [item for item in items if isinstance(item, dict)]
        return cls(
            [as_text(r.get("agent", "")) for r in refs], [as_index(r.get("index")) for r in refs]
        )


def as_text(value: object) -> str:
    """A JSON value read as text (a string as it is)."""
    return value if type(value) is str else str(value)


def as_index(value: object) -> int:
    """A JSON value read as a proposal's index (0 when it is no int)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _floats_json(values: npt.NDArray[np.float64]) -> list[bytes]:
    """Each finite float as the standard library writes it (``float.__repr__``): msgspec's
    spelling of the whole column, split, with the few it spells otherwise respelled."""
    if not len(values):
        return []
    spelled = _json(values.tolist())[1:-1].split(b",")  # a number holds no comma
    for i in odd_positions(values):
        value = float(values[i])
        if not np.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
        spelled[i] = float.__repr__(value).encode()
    return spelled


def _each(values: Iterable[Any]) -> list[bytes]:
    """The JSON of each value, made once per distinct value (a column of few values: roles,
    endpoints, kinds)."""
    made: dict[Any, bytes] = {}
    out = []
    for value in values:
        spelled = made.get(value)
        if spelled is None:
            spelled = made[value] = _json(value)
        out.append(spelled)
    return out


def proposal_rows(
    rows: MoveColumns, roles: Sequence[str], unretrieved: Sequence[Sequence[str]]
) -> list[bytes]:
    """The rows of a ``proposals`` record for column moves, each exactly the bytes
    ``json.dumps`` writes for its JSON form: the row's :class:`Proposal` dumped (index 0, no
    deltas), then its agent's role and the documents it cited but never retrieved."""
    kind = _json(rows.kind)
    return [
        _PROPOSAL
        % (
            _json(agent),
            kind,
            endpoint,
            direction,
            magnitude,
            _json(summary),
            _json(cites),
            role,
            _json(missing) if missing else b"[]",
        )
        for agent, endpoint, direction, magnitude, summary, cites, role, missing in zip(
            rows.agents,
            _each(rows.endpoints),
            _floats_json(rows.direction),
            _floats_json(rows.magnitude),
            rows.summaries,
            rows.cites,
            _each(roles),
            unretrieved,
            strict=True,
        )
    ]


def review_payload(verdict: TickReview) -> tuple[dict[str, Any], list[float]]:
    """The ``review`` record's JSON data and every float it holds: what the same review as
    one ``Review`` dumps (:meth:`TickReview.as_review`), its accepted references and ledger
    evidence written from their columns, with the accepted references the forecast graph
    keeps."""
    data, floats = verdict.review_json()
    agents, indexes = verdict.proposals.column("agent"), verdict.proposals.column("index")
    taken = [agents[i] for i in verdict.accepted]
    numbers = [indexes[i] for i in verdict.accepted]
    data["accepted"] = raw_rows(
        [_ACCEPTED % (_json(agent), index) for agent, index in zip(taken, numbers, strict=True)]
    )
    evidence = verdict.evidence
    moved = [compact_bytes(update) for update in data["ledger"]]  # status moves: no float
    entries = [
        _EVIDENCE % (endpoint, kind, _json(ref), _json(note))
        for endpoint, kind, ref, note in zip(
            _each(evidence.endpoints),
            _each(evidence.kinds),
            evidence.refs,
            evidence.notes,
            strict=True,
        )
    ]
    data["ledger"] = raw_rows([*moved, *entries])
    return Kept.of(data, {"accepted": KeptAccepted(taken, numbers)}), floats
