"""What the gateway logs of each call: an access (a search or a read, with the ids it gave),
its trace record, a batch of calls kept as columns, and the JSON bytes a tick's accesses are
written as. The log that indexes them for citation checks is :mod:`worldsim.gateway.access_log`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple

from pydantic import AwareDatetime, field_serializer

from worldsim.domain.cards import utc_iso
from worldsim.domain.values import FrozenModel

__all__ = [
    "ACCESS_DEFAULTS",
    "Access",
    "Calls",
    "Logged",
    "ReadBatch",
    "RetrievalRecord",
    "SearchBatch",
    "ToolName",
    "access_json",
]

ToolName = Literal["search_evidence", "open_document"]


class Access(FrozenModel):
    """One gateway access as an agent made it: who called, which tool with what, and what came
    back. ``doc_ids`` are the documents the caller actually received: the hits of a search, or
    the one document opened. A refused open has ``refused=True``, a ``reason`` and no
    ``doc_ids``. A trace's ``retrievals`` record holds a tick's accesses in this form."""

    agent: str
    tool: ToolName
    query: str | None = None
    doc_id: str | None = None
    k: int | None = None
    doc_ids: tuple[str, ...] = ()
    refused: bool = False
    reason: Literal["unknown", "after_cutoff"] | None = None


class RetrievalRecord(Access):
    """One logged gateway access, with where it was made (timeline, tick) and the gateway's
    cut-off (each access of a ``retrievals`` record, in this form)."""

    timeline: str | None = None
    tick: int | None = None
    cutoff: AwareDatetime

    @field_serializer("cutoff", when_used="json")
    def _utc(self, value: datetime) -> str:
        return utc_iso(value)


ACCESS_DEFAULTS: dict[str, Any] = {
    name: field.default for name, field in Access.model_fields.items() if not field.is_required()
}
"""An access's fields a ``retrievals`` record leaves out when they hold their defaults."""


def access_json(
    agent: str,
    tool: ToolName,
    *,
    query: str | None = None,
    doc_id: str | None = None,
    k: int | None = None,
    doc_ids: Sequence[str] = (),
    refused: bool = False,
    reason: Literal["unknown", "after_cutoff"] | None = None,
) -> dict[str, Any]:
    """One access in a ``retrievals`` record's JSON form: :class:`Access`'s fields in its
    order, those at their defaults left out (made without building an :class:`Access`, as the
    gateway logs every call)."""
    access: dict[str, Any] = {"agent": agent, "tool": tool}
    if query is not None:
        access["query"] = query
    if doc_id is not None:
        access["doc_id"] = doc_id
    if k is not None:
        access["k"] = k
    if doc_ids:
        access["doc_ids"] = list(doc_ids)
    if refused:
        access["refused"] = True
    if reason is not None:
        access["reason"] = reason
    return access


class Logged(NamedTuple):
    """Accesses as the gateway logs them: made in one call at one timeline and tick, the
    gateway's cut-off, and each access in its JSON form (:func:`access_json`), in call order."""

    timeline: str | None
    tick: int | None
    cutoff: datetime
    accesses: list[dict[str, Any]]

    @classmethod
    def of(cls, record: RetrievalRecord) -> Logged:
        """One logged record as a batch of one."""
        fields = {f: getattr(record, f) for f in Access.model_fields}
        return cls(record.timeline, record.tick, record.cutoff, [access_json(**fields)])

    def records(self) -> list[RetrievalRecord]:
        """The accesses as validated :class:`RetrievalRecord` objects."""
        where = {"timeline": self.timeline, "tick": self.tick, "cutoff": self.cutoff}
        return [RetrievalRecord(**access, **where) for access in self.accesses]


@dataclass(eq=False, slots=True)
class _Batch:
    """One batch call's accesses as columns, one row per agent: what a ``retrievals`` record
    holds of them is made when asked (:attr:`accesses`), and each agent's receipts are looked
    up by row."""

    timeline: str | None
    tick: int | None
    cutoff: datetime
    agents: Sequence[str]
    _rows: dict[str, int] | None = field(default=None, init=False, repr=False)

    def rows(self) -> dict[str, int]:
        """Each agent's row (an agent has one row in a batch)."""
        if self._rows is None:
            self._rows = dict(zip(self.agents, range(len(self.agents)), strict=True))
        return self._rows

    def received_by(self, agent: str) -> frozenset[str] | None:
        """The ids ``agent`` received in this call (``None``: it made none of its calls)."""
        i = self.rows().get(agent)
        return None if i is None else _ids(self.receipt(i))

    def receipt(self, i: int) -> tuple[str, ...]:
        """The ids row ``i``'s agent received (a tuple shared between rows that received the
        same)."""
        raise NotImplementedError

    @property
    def documents(self) -> set[str]:
        """Every id received in this call."""
        raise NotImplementedError

    @property
    def accesses(self) -> list[dict[str, Any]]:
        """The accesses in their JSON form (:func:`access_json`), in call order."""
        raise NotImplementedError

    def records(self) -> list[RetrievalRecord]:
        return Logged(self.timeline, self.tick, self.cutoff, self.accesses).records()


@dataclass(eq=False, slots=True)
class SearchBatch(_Batch):
    """A ``search_evidence`` per agent, with ``k``: its query and the ids of its hits (the
    same tuple for agents whose searches the store answered alike)."""

    queries: Sequence[str]
    k: int
    hits: Sequence[tuple[str, ...]]

    def receipt(self, i: int) -> tuple[str, ...]:
        return self.hits[i]

    @property
    def documents(self) -> set[str]:
        return {doc for ids in {id(h): h for h in self.hits}.values() for doc in ids}

    @property
    def accesses(self) -> list[dict[str, Any]]:
        return [
            access_json(agent, "search_evidence", query=query, k=self.k, doc_ids=ids)
            for agent, query, ids in zip(self.agents, self.queries, self.hits, strict=True)
        ]


@dataclass(eq=False, slots=True)
class ReadBatch(_Batch):
    """The ``open_document`` calls of several agents: each agent's ids in call order (the
    same tuple for agents that read the same list) and, for the ids refused, the reason."""

    reads: Sequence[tuple[str, ...]]
    refused: dict[str, Literal["unknown", "after_cutoff"]]

    def receipt(self, i: int) -> tuple[str, ...]:
        ids = self.reads[i]
        return ids if not self.refused else tuple(d for d in ids if d not in self.refused)

    @property
    def documents(self) -> set[str]:
        unique = {id(ids): ids for ids in self.reads}.values()
        return {doc for ids in unique for doc in ids if doc not in self.refused}

    @property
    def accesses(self) -> list[dict[str, Any]]:
        return [
            access_json(agent, "open_document", doc_id=doc, doc_ids=[doc])
            if doc not in self.refused
            else access_json(
                agent, "open_document", doc_id=doc, refused=True, reason=self.refused[doc]
            )
            for agent, ids in zip(self.agents, self.reads, strict=True)
            for doc in ids
        ]


@functools.lru_cache(maxsize=4_096)
def _ids(ids: tuple[str, ...]) -> frozenset[str]:
    """A tuple of ids as a set (the same few lists recur across a batch's agents)."""
    return frozenset(ids)


Calls = Logged | SearchBatch | ReadBatch
"""What the log holds per call: a call's accesses in their JSON form, or a batch's columns."""
