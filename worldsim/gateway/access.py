"""The gateway's access log, indexed by agent and timeline as records are appended.

A citation check asks which documents an agent received in a timeline or its ancestors. Scanning
the whole log for it made every proposal cost in proportion to the run's history; the index
answers it from the few sets of the timeline's lineage instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, field_serializer

from worldsim.domain.cards import utc_iso

__all__ = ["Access", "AccessLog", "RetrievalRecord", "ToolName", "ancestry"]

ToolName = Literal["search_evidence", "open_document"]


class Access(BaseModel):
    """One gateway access as an agent made it: who called, which tool with what, and what came
    back. ``doc_ids`` are the documents the caller actually received: the hits of a search, or
    the one document opened. A refused open has ``refused=True``, a ``reason`` and no
    ``doc_ids``. A trace's ``retrievals`` record holds a tick's accesses in this form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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
    cut-off; traces written before ``retrievals`` records hold one ``retrieval`` record of this
    form per access."""

    timeline: str | None = None
    tick: int | None = None
    cutoff: AwareDatetime

    @field_serializer("cutoff", when_used="json")
    def _utc(self, value: datetime) -> str:
        return utc_iso(value)


def ancestry(timeline: str) -> list[str]:
    """``"t0.2.1"`` → ``["t0", "t0.2", "t0.2.1"]``: the timeline and every ancestor's id."""
    parts = timeline.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


class AccessLog(list[RetrievalRecord]):
    """The records in call order (a list), plus the ids each agent received per timeline and
    every id anyone received.

    Only :meth:`append` and :meth:`extend` may add records (the gateway uses nothing else), so
    the index describes every record added, including those :meth:`forget` has let go.
    """

    def __init__(self, records: Iterable[RetrievalRecord] = ()) -> None:
        super().__init__()
        self._received: dict[str, dict[str | None, set[str]]] = {}
        self.documents: set[str] = set()
        """Every document id received through the gateway so far."""
        self.extend(records)

    def append(self, record: RetrievalRecord) -> None:
        super().append(record)
        if not record.refused and record.doc_ids:
            by_timeline = self._received.setdefault(record.agent, {})
            by_timeline.setdefault(record.timeline, set()).update(record.doc_ids)
            self.documents.update(record.doc_ids)

    def forget(self) -> None:
        """Let the records go (they are in the trace); the index keeps what they said."""
        self.clear()

    def take(self, timeline: str) -> list[RetrievalRecord]:
        """Let the records made in ``timeline`` go and return them (in call order); the
        others stay, and the index keeps what every record said."""
        taken = [r for r in self if r.timeline == timeline]
        if taken:
            self[:] = [r for r in self if r.timeline != timeline]
        return taken

    def extend(self, records: Iterable[RetrievalRecord]) -> None:
        for record in records:
            self.append(record)

    def received(self, agent: str, timeline: str | None = None) -> frozenset[str]:
        """Ids ``agent`` received: in ``timeline`` and its ancestors (records without a
        timeline count everywhere), or anywhere when ``timeline`` is None."""
        by_timeline = self._received.get(agent)
        if not by_timeline:
            return frozenset()
        if timeline is None:
            return frozenset().union(*by_timeline.values())
        keys: list[str | None] = [None, *ancestry(timeline)]
        return frozenset().union(*(by_timeline.get(key, ()) for key in keys))
