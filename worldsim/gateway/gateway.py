"""The Temporal Gateway: evidence search and fetch bound to one cutoff, with an access log.

The cutoff is the card's as-of date for the whole run (DESIGN §4.2): whatever tick is being
simulated, only documents published strictly before it are visible. The gateway — the tool
layer, not the agent — records every search and every open as a :class:`RetrievalRecord`, so
source precision rests on logged access rather than on what an agent says it read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from pydantic import BaseModel, Field

from worldsim.domain.cards import Card, EvidenceDatabase, utc_iso
from worldsim.domain.errors import ConfigError, GatewayRefusal
from worldsim.domain.logs import get_logger
from worldsim.domain.memo import IdentityMemo
from worldsim.domain.values import FrozenModel
from worldsim.gateway.access import (
    Calls,
    ReadBatch,
    RetrievalRecord,
    SearchBatch,
    access_json,
)
from worldsim.gateway.access_log import AccessLog
from worldsim.gateway.documents import SearchHit, StoredDocument, to_epoch_us
from worldsim.gateway.store import EvidenceStore, memory_store, open_store

__all__ = [
    "DocumentView",
    "Gateway",
    "RetrievalRecord",
    "SearchResult",
    "check_evidence",
    "gateway_for_card",
    "retrieved_by",
    "unretrieved_citations",
]

log = get_logger(__name__)


class SearchResult(FrozenModel):
    """What ``search_evidence`` hands an agent for one hit."""

    id: str
    title: str
    published_at: str
    source: str | None = None
    url: str | None = None
    snippet: str = ""
    score: float = Field(description="BM25 score from SQLite; lower is a better match")


class DocumentView(FrozenModel):
    """What ``open_document`` hands an agent."""

    id: str
    title: str
    published_at: str
    text: str
    source: str | None = None
    url: str | None = None
    stance: float | None = None


#: Hits and documents as agents see them (the store answers a query or a read it answered
#: before with the same objects, and gives a new document after documents are added).
_SHOWN: IdentityMemo[BaseModel] = IdentityMemo(4_096)

#: A store's answer as the agents of one cut-off see it: the hits' ids and views.
_VISIBLE: IdentityMemo[tuple[tuple[str, ...], tuple[SearchResult, ...]]] = IdentityMemo(4_096)

_Shown = TypeVar("_Shown", SearchResult, DocumentView)


def _shown(model: type[_Shown], stored: SearchHit | StoredDocument) -> _Shown:
    """``stored`` as an agent sees it: ``model``'s fields of it, its date as UTC ISO text;
    made once per stored object."""

    def make() -> BaseModel:
        fields = {name: getattr(stored, name) for name in model.model_fields}
        fields["published_at"] = utc_iso(stored.published_at)
        return model(**fields)

    return cast(_Shown, _SHOWN.get(model.__name__, stored, make))


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
        self._visible_kind = f"before {self._cutoff_us}"  # the store's answers as shown here
        self._log = AccessLog()

    @property
    def cutoff(self) -> datetime:
        return self._cutoff

    @property
    def access_log(self) -> tuple[RetrievalRecord, ...]:
        """Every access since the last :meth:`drain`, in call order (all of them, when nothing
        drains the log; a run drains it into its trace every tick)."""
        return tuple(self._log)

    @property
    def documents(self) -> frozenset[str]:
        """Every document id anyone received through this gateway, drained or not."""
        return frozenset(self._log.documents)

    def forked(self, child: str, tick: int) -> None:
        """``child`` forked off its parent at ``tick``: its citation checks count the parent's
        receipts up to that tick only (what it inherited), however far the parent has run."""
        self._log.forked(child, tick)

    def restore(self, records: Iterable[RetrievalRecord]) -> None:
        """Take back the accesses a resumed run made before it was cut off (already traced):
        the citation checks know them, and they are not drained again."""
        self._log.extend(records)
        self._log.forget()

    def take(self, timeline: str | None = None) -> list[Calls]:
        """The accesses logged since the previous take (what the engine still has to trace),
        or only those made in ``timeline``, in their JSON form; the log lets them go, so a
        long run holds only what a tick adds, and keeps their index for citation checks."""
        return self._log.forget() if timeline is None else self._log.take(timeline)

    def drain(self, timeline: str | None = None) -> list[RetrievalRecord]:
        """:meth:`take`, each access as a validated :class:`RetrievalRecord`."""
        return [record for logged in self.take(timeline) for record in logged.records()]

    async def published_since(self, since: datetime, *, limit: int) -> list[StoredDocument]:
        """The documents published in ``[since, cutoff)``, by date then id, at most ``limit``:
        a continued run's news (its trace records them as ``news``, not as retrievals)."""
        if since.tzinfo is None or since.utcoffset() is None:
            raise ConfigError("the news' lower bound has no timezone", field="since")
        if limit <= 0 or since >= self._cutoff:
            return []
        return await self._store.published_in(since=since, before=self._cutoff, limit=limit)

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
        (found,) = await self.search_each([(agent, query)], k, timeline=timeline, tick=tick)
        return found

    async def search_each(
        self,
        queries: Sequence[tuple[str, str]],
        k: int = 5,
        *,
        timeline: str | None = None,
        tick: int | None = None,
    ) -> list[list[SearchResult]]:
        """:meth:`search` for each ``(agent, query)``, logged in that order: the answers a
        tick's agents would get one call at a time, with one checkpoint for all of them."""
        answers = await self._store.search_many([q for _, q in queries], before=self._cutoff, k=k)
        found: list[list[SearchResult]] = []
        accesses: list[dict[str, Any]] = []
        for (agent, query), hits in zip(queries, answers, strict=True):
            ids, views = self._visible(hits)
            # access_json's form, made in place (every call of every agent is logged)
            access = {"agent": agent, "tool": "search_evidence", "query": query, "k": k}
            if ids:
                access["doc_ids"] = list(ids)
            accesses.append(access)
            found.append(list(views))
        self._log.add_each(timeline, tick, self._cutoff, accesses)
        return found

    async def search_batch(
        self,
        agents: Sequence[str],
        queries: Sequence[str],
        k: int = 5,
        *,
        timeline: str | None = None,
        tick: int | None = None,
    ) -> list[tuple[str, ...]]:
        """The ids :meth:`search` would find for each agent's query, logged as one entry of
        columns (one checkpoint for all): a tick's agents searching together."""
        answers = await self._store.search_many(queries, before=self._cutoff, k=k)
        seen: dict[int, tuple[str, ...]] = {}  # the store answers a query asked before alike
        found: list[tuple[str, ...]] = []
        for hits in answers:
            ids = seen.get(id(hits))
            if ids is None:
                ids = seen[id(hits)] = self._visible(hits)[0]
            found.append(ids)
        self._log.add_batch(
            SearchBatch(timeline, tick, self._cutoff, tuple(agents), queries, k, found)
        )
        return found

    async def read_batch(
        self,
        agents: Sequence[str],
        reads: Sequence[tuple[str, ...]],
        *,
        timeline: str | None = None,
        tick: int | None = None,
    ) -> dict[str, DocumentView | None]:
        """:meth:`open_document` for each agent's ids, logged as one entry of columns (one
        checkpoint for all): each document read, as agents see it, or ``None`` where it is
        refused (unknown, or not before the cutoff)."""
        wanted = list(
            dict.fromkeys(doc for ids in {id(r): r for r in reads}.values() for doc in ids)
        )
        stored = await self._store.get_many(wanted)
        docs: dict[str, DocumentView | None] = {}
        refused: dict[str, Literal["unknown", "after_cutoff"]] = {}
        for doc_id, doc in zip(wanted, stored, strict=True):
            if doc is None or doc.published_us >= self._cutoff_us:
                refused[doc_id] = "unknown" if doc is None else "after_cutoff"
                log.info("gateway_refused", doc_id=doc_id, reason=refused[doc_id])
                docs[doc_id] = None
            else:
                docs[doc_id] = _shown(DocumentView, doc)
        self._log.add_batch(ReadBatch(timeline, tick, self._cutoff, tuple(agents), reads, refused))
        return docs

    def _visible(
        self, hits: tuple[SearchHit, ...]
    ) -> tuple[tuple[str, ...], tuple[SearchResult, ...]]:
        """The ids and agent views of the hits before the cutoff, made once per answer of the
        store (which gives the same tuple for a query it answered before). The store already
        filters; this guard keeps the invariant if it ever changes."""

        def make() -> tuple[tuple[str, ...], tuple[SearchResult, ...]]:
            visible = [h for h in hits if h.published_us < self._cutoff_us]
            return tuple(h.id for h in visible), tuple(_shown(SearchResult, h) for h in visible)

        return _VISIBLE.get(self._visible_kind, hits, make)

    async def open_document(
        self,
        doc_id: str,
        *,
        agent: str = "",
        timeline: str | None = None,
        tick: int | None = None,
    ) -> DocumentView:
        """The full document, or :class:`GatewayRefusal` if unknown or not before the cutoff.

        A document at or after the cutoff is refused exactly as an id that never existed
        (same message, same reason, the same lookup), so a refusal tells the caller nothing
        about the future; only the access log records which of the two it was.
        """
        (doc,) = await self.open_each([(agent, doc_id)], timeline=timeline, tick=tick)
        if doc is None:
            raise GatewayRefusal(
                f"no document '{doc_id}' in the evidence store",
                doc_id=doc_id,
                reason="unknown",
                timeline=timeline,
                tick=tick,
            )
        return doc

    async def open_each(
        self,
        opens: Sequence[tuple[str, str]],
        *,
        timeline: str | None = None,
        tick: int | None = None,
    ) -> list[DocumentView | None]:
        """:meth:`open_document` for each ``(agent, doc_id)``, logged in that order, with one
        checkpoint for all: a refused one (unknown, or not before the cutoff) is ``None``."""
        stored = await self._store.get_many([doc_id for _, doc_id in opens])
        docs: list[DocumentView | None] = []
        accesses: list[dict[str, Any]] = []
        shown: dict[str, DocumentView] = {}  # a tick's agents read the same few documents
        for (agent, doc_id), doc in zip(opens, stored, strict=True):
            reason: Literal["unknown", "after_cutoff"] | None = None
            if doc is None:
                reason = "unknown"
            elif doc.published_us >= self._cutoff_us:
                reason = "after_cutoff"
            if reason is not None or doc is None:
                accesses.append(
                    access_json(agent, "open_document", doc_id=doc_id, refused=True, reason=reason)
                )
                log.info("gateway_refused", doc_id=doc_id, reason=reason, agent=agent)
                docs.append(None)
                continue
            # access_json's form, made in place (every document an agent reads is logged)
            accesses.append(
                {"agent": agent, "tool": "open_document", "doc_id": doc_id, "doc_ids": [doc_id]}
            )
            view = shown.get(doc_id)
            if view is None:
                view = shown[doc_id] = _shown(DocumentView, doc)
            docs.append(view)
        self._log.add_each(timeline, tick, self._cutoff, accesses)
        return docs

    def unretrieved_citations(
        self, cited: Sequence[str], agent: str, *, timeline: str | None = None
    ) -> list[str]:
        """The cited ids this agent never received here (see :func:`unretrieved_citations`),
        answered from the log's index in O(lineage), however long the run has been."""
        return self._log.unreceived(cited, agent, timeline)

    def unretrieved_each(
        self, cited: Sequence[tuple[str, Sequence[str]]], *, timeline: str | None = None
    ) -> list[list[str]]:
        """:meth:`unretrieved_citations` for each ``(agent, cited ids)``, in order."""
        return self._log.unreceived_each(cited, timeline)


def retrieved_by(
    records: Iterable[RetrievalRecord], agent: str, *, timeline: str | None = None
) -> frozenset[str]:
    """Ids of documents ``agent`` received through the gateway.

    With ``timeline``, only records made in that timeline or in its ancestors count (a child
    inherits its parent's history); without it, every record of the agent counts. A gateway's
    own log answers from its index; any other iterable is indexed first.
    """
    log = records if isinstance(records, AccessLog) else AccessLog(records)
    return log.received(agent, timeline)


def unretrieved_citations(
    cited: Sequence[str],
    records: Iterable[RetrievalRecord],
    agent: str,
    *,
    timeline: str | None = None,
) -> list[str]:
    """The cited ids the agent never received from the gateway, in citation order, once each."""
    log = records if isinstance(records, AccessLog) else AccessLog(records)
    return log.unreceived(cited, agent, timeline)


@asynccontextmanager
async def gateway_for_card(
    card: Card, *, card_path: str | Path | None = None, cutoff: datetime | None = None
) -> AsyncIterator[Gateway]:
    """A gateway for a run of ``card``, cut off at its as-of date (or at ``cutoff``).

    Inline ``evidence`` documents go into a private in-memory store; ``evidence: {database:
    PATH}`` opens that database read-only (a relative path is read against the card's folder).
    A card without evidence gets an empty store, so every search returns nothing. A database
    that is missing, not SQLite or of another schema is a :class:`ConfigError` naming the card
    and its ``evidence.database`` field.
    """
    evidence = card.evidence
    async with AsyncExitStack() as stack:
        if isinstance(evidence, EvidenceDatabase):
            db_path = Path(evidence.database)
            if not db_path.is_absolute() and card_path is not None:
                db_path = Path(card_path).parent / db_path
            try:
                store = await stack.enter_async_context(open_store(db_path))
            except ConfigError as exc:
                raise ConfigError(
                    f"{exc.message}: {db_path}", file=card_path, field="evidence.database"
                ) from None
        else:
            store = await stack.enter_async_context(memory_store(evidence or ()))
        yield Gateway(store, cutoff=cutoff or card.as_of)


async def check_evidence(card: Card, *, card_path: str | Path | None = None) -> None:
    """Open and close the card's evidence database, so that a bad one is refused before a run
    creates its trace, its cache or a log line (the run opens it again when it starts)."""
    if isinstance(card.evidence, EvidenceDatabase):
        async with gateway_for_card(card, card_path=card_path):
            pass
