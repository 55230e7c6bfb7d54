"""A tick's proposals, review and accesses written from their columns: each row a struct (its
fields in the record's order, made by ``map`` over the columns, untracked by the collector:
:func:`~worldsim.domain.jsonbytes.json_row`) that the record's encoding writes exactly as
``json.dumps`` writes the row's JSON form, without a dict per row; and what the run's forecast
graph keeps of those records (:class:`KeptProposals`, :class:`KeptAccepted`), handed to it
beside the data (:class:`Kept`) rather than read back.

A tick of 10⁵ agents would otherwise make a few hundred thousand dicts and lists per record,
only to encode them once: their making cost about as much as their encoding, and their number
sent the collector over the whole of them several times a run. A row made as bytes by a line of
Python cost twice what a struct made by ``map`` and written by msgspec costs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, islice, pairwise, repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from worldsim.domain.jsonbytes import compact_bytes, json_row, odd_positions, raw_json
from worldsim.gateway.access import Calls, ReadBatch, SearchBatch
from worldsim.world.columns import MoveColumns, TickReview

__all__ = [
    "Kept",
    "KeptAccepted",
    "KeptProposals",
    "access_rows",
    "as_index",
    "as_text",
    "proposal_rows",
    "review_payload",
]


class Kept(dict[str, Any]):
    """A record's JSON data as written, with ``kept``: what the forecast graph keeps of it,
    made from the columns the data was written from (its rows are structs and bytes written
    as they stand, which the graph does not read back)."""

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


def _floats(values: npt.NDArray[np.float64]) -> list[Any]:
    """The column's floats, each where msgspec writes it as the standard library does, else
    its standard spelling as ``msgspec.Raw``."""
    out: list[Any] = values.tolist()
    for i in odd_positions(values):
        out[i] = raw_json(_standard(out[i]).encode())
    return out


def _standard(value: float) -> str:
    if not np.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    return float.__repr__(value)


_Row = json_row(
    "ProposalRow",
    (
        *("agent", "index", "kind", "endpoint", "direction", "magnitude", "summary"),
        *("deltas", "cites", "role", "unretrieved_citations"),
    ),
)
"""A ``proposals`` record's row made from columns (floats as :func:`_floats` leaves them)."""

_Accepted = json_row("AcceptedRow", ("agent", "index"))
"""An accepted reference of a ``review`` record made from columns."""
_Evidence = json_row("EvidenceRow", ("kind", "ref", "note"))
"""A ledger entry's evidence: its kind, the proposal's reference, the note."""
_LedgerEntry = json_row("LedgerRow", ("endpoint", "status", "evidence"))
"""A ``review`` record's ledger entry that adds evidence (no status move)."""


def proposal_rows(
    rows: MoveColumns, roles: Sequence[str], unretrieved: Sequence[Sequence[str]]
) -> list[Any]:
    """The rows of a ``proposals`` record for column moves, each written exactly as
    ``json.dumps`` writes its JSON form: the row's :class:`Proposal` dumped (index 0, no
    deltas), then its agent's role and the documents it cited but never retrieved. Each row
    is a struct msgspec writes where it stands (made by ``map``, not a line of Python a row)."""
    n = len(rows)
    columns = (roles, unretrieved, rows.endpoints, rows.direction, rows.magnitude, rows.cites)
    if any(len(column) != n for column in (*columns, rows.summaries)):
        raise ValueError("columns of different lengths")
    return list(
        map(
            _Row,
            rows.agents,
            repeat(0, n),
            repeat(rows.kind, n),
            rows.endpoints,
            _floats(rows.direction),
            _floats(rows.magnitude),
            rows.summaries,
            repeat((), n),
            rows.cites,
            roles,
            unretrieved,
        )
    )


def review_payload(verdict: TickReview) -> tuple[dict[str, Any], list[float]]:
    """The ``review`` record's JSON data and every float it holds: what the same review as
    one ``Review`` dumps (:meth:`TickReview.as_review`), its accepted references and ledger
    evidence written from their columns, with the accepted references the forecast graph
    keeps."""
    data, floats = verdict.review_json()
    agents, indexes = verdict.proposals.column("agent"), verdict.proposals.column("index")
    taken = [agents[i] for i in verdict.accepted]
    numbers = [indexes[i] for i in verdict.accepted]
    data["accepted"] = list(map(_Accepted, taken, numbers))
    evidence = verdict.evidence
    n = len(evidence.refs)
    if not len(evidence.endpoints) == len(evidence.kinds) == len(evidence.notes) == n:
        raise ValueError("columns of different lengths")
    moved = [raw_json(compact_bytes(update)) for update in data["ledger"]]  # no float
    found = map(_Evidence, evidence.kinds, evidence.refs, evidence.notes)
    data["ledger"] = [*moved, *map(_LedgerEntry, evidence.endpoints, repeat(None, n), found)]
    return Kept.of(data, {"accepted": KeptAccepted(taken, numbers)}), floats


_Search = json_row(
    "SearchRow", ("agent", "tool", "query", "k", "doc_ids"), optional={"doc_ids": ()}
)
"""A ``search_evidence`` access of a ``retrievals`` record (no ``doc_ids`` without hits)."""
_Read = json_row("ReadRow", ("agent", "tool", "doc_id", "doc_ids"))
"""An ``open_document`` access that received its document."""
_Refused = json_row("RefusedRow", ("agent", "tool", "doc_id", "refused", "reason"))
"""An ``open_document`` access refused, with the reason."""


def access_rows(logged: Sequence[Calls]) -> list[Any] | None:
    """The items of a ``retrievals`` record's ``accesses`` for a tick's calls that are a batch
    of searches and then a batch of reads by the same agents in id order (an offline tick's):
    by agent, each agent's search and then its reads, each a struct written exactly as
    ``json.dumps`` writes the access's JSON form (``access_json``), made by ``map`` over the
    batches' columns. ``None`` for any other calls (sort their accesses instead)."""
    if len(logged) != 2:
        return None
    search, read = logged
    if not (
        isinstance(search, SearchBatch)
        and isinstance(read, ReadBatch)
        and search.agents == read.agents
        and all(a < b for a, b in pairwise(search.agents))
    ):
        return None
    agents, n = search.agents, len(search.agents)
    tool, k, hits = repeat("search_evidence", n), repeat(search.k, n), search.hits
    found = list(map(_Search, agents, tool, search.queries, k, hits))
    docs = list(chain.from_iterable(read.reads))
    counts = set(map(len, read.reads))
    if read.refused or len(counts) > 1:  # some agents read fewer, or were refused some
        reads = iter(_reads(read, docs))
        out: list[Any] = []
        for row, ids in zip(found, read.reads, strict=True):
            out.append(row)
            out += islice(reads, len(ids))
        return out
    each = counts.pop() if counts else 0
    readers = chain.from_iterable(map(repeat, agents, repeat(each, n)))  # each agent `each` times
    single = {doc: (doc,) for doc in set(docs)}
    opened = list(map(_Read, readers, repeat("open_document"), docs, map(single.__getitem__, docs)))
    out = [None] * (n * (each + 1))
    out[:: each + 1] = found
    for j in range(each):
        out[j + 1 :: each + 1] = opened[j::each]
    return out


def _reads(read: ReadBatch, docs: Sequence[str]) -> list[Any]:
    """Each read of a batch, as its access, in order (agent by agent)."""
    readers = chain.from_iterable(map(repeat, read.agents, map(len, read.reads)))
    refused = read.refused
    return [
        _Read(agent, "open_document", doc, (doc,))
        if doc not in refused
        else _Refused(agent, "open_document", doc, True, refused[doc])
        for agent, doc in zip(readers, docs, strict=True)
    ]
