"""The Temporal Gateway: evidence search and fetch bound to one cutoff, with an access log.

The cutoff is the card's as-of date for the whole run (DESIGN §4.2): whatever tick is being
simulated, only documents published strictly before it are visible. The gateway — the tool
layer, not the agent — records every search and every open as a :class:`RetrievalRecord`, so
source precision rests on logged access rather than on what an agent says it read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import anyio
import structlog
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_serializer

from worldsim.domain.cards import Card, EvidenceDatabase
from worldsim.domain.errors import ConfigError, GatewayRefusal
from worldsim.gateway.store import (
    EvidenceStore,
    SearchHit,
    memory_store,
    open_store,
    to_epoch_us,
)

__all__ = [
    "DocumentView",
    "Gateway",
    "RetrievalRecord",
    "SearchResult",
    "gateway_for_card",
    "retrieved_by",
    "unretrieved_citations",
]

log = structlog.get_logger(__name__)

ToolName = Literal["search_evidence", "open_document"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrievalRecord(_Frozen):
    """One logged gateway access; the ``data`` of a trace record of type ``"retrieval"``.

    ``doc_ids`` are the documents the caller actually received: the hits of a search, or the
    one document opened. A refused open has ``refused=True``, a ``reason`` and no ``doc_ids``.
    """

    agent: str
    timeline: str | None = None
    tick: int | None = None
    tool: ToolName
    query: str | None = None
    doc_id: str | None = None
    k: int | None = None
    cutoff: AwareDatetime
    doc_ids: tuple[str, ...] = ()
    refused: bool = False
    reason: Literal["unknown", "after_cutoff"] | None = None

    @field_serializer("cutoff", when_used="json")
    def _utc(self, value: datetime) -> str:
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class SearchResult(_Frozen):
    """What ``search_evidence`` hands an agent for one hit."""

    id: str
    title: str
    published_at: str
    source: str | None = None
    url: str | None = None
    snippet: str = ""
    score: float = Field(description="BM25 score from SQLite; lower is a better match")


class DocumentView(_Frozen):
    """What ``open_document`` hands an agent."""

    id: str
    title: str
    published_at: str
    text: str
    source: str | None = None
    url: str | None = None
    stance: float | None = None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _result(hit: SearchHit) -> SearchResult:
    return SearchResult(
        id=hit.id,
        title=hit.title,
        published_at=_iso(hit.published_at),
        source=hit.source,
        url=hit.url,
        snippet=hit.snippet,
        score=hit.score,
    )


class Gateway:
    """Evidence access bound to a fixed cutoff; every call is appended to the access log.

    Args:
        store: an open evidence store.
        cutoff: an aware datetime; documents at or after it are never returned or opened.
    """

    def __init__(self, store: EvidenceStore, *, cutoff: datetime) -> None:
        if cutoff.tzinfo is None or cutoff.utcoffset() is None:
            raise ConfigError("gateway cutoff has no timezone", field="cutoff")
        self._store = store
        self._cutoff = cutoff.astimezone(UTC)
        self._cutoff_us = to_epoch_us(self._cutoff)
        self._log: list[RetrievalRecord] = []
        self._drained = 0

    @property
    def cutoff(self) -> datetime:
        return self._cutoff

    @property
    def access_log(self) -> tuple[RetrievalRecord, ...]:
        """Every access so far, in call order."""
        return tuple(self._log)

    def restore(self, records: Iterable[RetrievalRecord]) -> None:
        """Take back the accesses a resumed run made before it was cut off (already traced)."""
        self._log.extend(records)
        self._drained = len(self._log)

    def drain(self) -> list[RetrievalRecord]:
        """The records added since the previous drain (what the engine still has to trace)."""
        fresh = self._log[self._drained :]
        self._drained = len(self._log)
        return fresh

    async def search(
        self,
        query: str,
        k: int = 5,
        *,
        agent: str = "",
        timeline: str | None = None,
        tick: int | None = None,
    ) -> list[SearchResult]:
        """The ``k`` best BM25 matches for ``query`` published strictly before the cutoff."""
        hits = await self._store.search(query, before=self._cutoff, k=k)
        # The store already filters; this guard keeps the invariant if the store ever changes.
        visible = [h for h in hits if to_epoch_us(h.published_at) < self._cutoff_us]
        self._log.append(
            RetrievalRecord(
                agent=agent,
                timeline=timeline,
                tick=tick,
                tool="search_evidence",
                query=query,
                k=k,
                cutoff=self._cutoff,
                doc_ids=tuple(h.id for h in visible),
            )
        )
        return [_result(h) for h in visible]

    async def open_document(
        self,
        doc_id: str,
        *,
        agent: str = "",
        timeline: str | None = None,
        tick: int | None = None,
    ) -> DocumentView:
        """The full document, or :class:`GatewayRefusal` if unknown or not before the cutoff."""
        doc = await self._store.get(doc_id)
        reason: Literal["unknown", "after_cutoff"] | None = None
        if doc is None:
            reason = "unknown"
        elif to_epoch_us(doc.published_at) >= self._cutoff_us:
            reason = "after_cutoff"
        self._log.append(
            RetrievalRecord(
                agent=agent,
                timeline=timeline,
                tick=tick,
                tool="open_document",
                doc_id=doc_id,
                cutoff=self._cutoff,
                doc_ids=() if reason is not None else (doc_id,),
                refused=reason is not None,
                reason=reason,
            )
        )
        if reason is not None or doc is None:
            log.info("gateway_refused", doc_id=doc_id, reason=reason, agent=agent)
            message = (
                f"no document '{doc_id}' in the evidence store"
                if reason == "unknown"
                else f"document '{doc_id}' is dated at or after the cutoff {_iso(self._cutoff)}"
            )
            raise GatewayRefusal(
                message, doc_id=doc_id, reason=reason or "unknown", timeline=timeline, tick=tick
            )
        return DocumentView(
            id=doc.id,
            title=doc.title,
            published_at=_iso(doc.published_at),
            text=doc.text,
            source=doc.source,
            url=doc.url,
            stance=doc.stance,
        )

    def retrieved_ids(self, agent: str, *, timeline: str | None = None) -> frozenset[str]:
        """Documents this agent received (search hits or opened), see :func:`retrieved_by`."""
        return retrieved_by(self._log, agent, timeline=timeline)


def _in_lineage(record_timeline: str | None, timeline: str) -> bool:
    """A record counts for ``timeline`` if made there or in one of its ancestors."""
    if record_timeline is None:
        return True
    return timeline == record_timeline or timeline.startswith(record_timeline + ".")


def retrieved_by(
    records: Iterable[RetrievalRecord], agent: str, *, timeline: str | None = None
) -> frozenset[str]:
    """Ids of documents ``agent`` received through the gateway.

    With ``timeline``, only records made in that timeline or in its ancestors count (a child
    inherits its parent's history); without it, every record of the agent counts.
    """
    found: set[str] = set()
    for record in records:
        if record.agent != agent or record.refused:
            continue
        if timeline is not None and not _in_lineage(record.timeline, timeline):
            continue
        found.update(record.doc_ids)
    return frozenset(found)


def unretrieved_citations(
    cited: Sequence[str],
    records: Iterable[RetrievalRecord],
    agent: str,
    *,
    timeline: str | None = None,
) -> list[str]:
    """The cited ids the agent never received from the gateway, in citation order, once each."""
    known = retrieved_by(records, agent, timeline=timeline)
    return [doc_id for doc_id in dict.fromkeys(cited) if doc_id not in known]


@asynccontextmanager
async def gateway_for_card(
    card: Card, *, card_path: str | Path | None = None
) -> AsyncIterator[Gateway]:
    """A gateway for a run of ``card``, cut off at its as-of date.

    Inline ``evidence`` documents go into a private in-memory store; ``evidence: {database:
    PATH}`` opens that database (a relative path is read against the card's folder). A card
    without evidence gets an empty store, so every search returns nothing.
    """
    evidence = card.evidence
    if isinstance(evidence, EvidenceDatabase):
        db_path = Path(evidence.database)
        if not db_path.is_absolute() and card_path is not None:
            db_path = Path(card_path).parent / db_path
        if not await anyio.Path(db_path).is_file():
            raise ConfigError(
                f"evidence database not found: {db_path}",
                file=card_path,
                field="evidence.database",
            )
        async with open_store(db_path) as store:
            yield Gateway(store, cutoff=card.as_of)
    else:
        async with memory_store(evidence or ()) as store:
            yield Gateway(store, cutoff=card.as_of)
