"""The evidence store: dated documents in SQLite, searched with FTS5 and ranked by BM25.

Every document carries a timezone-aware ``published_at``. It is kept twice: as ISO text for
display and as integer microseconds since the Unix epoch (UTC) for comparison, so that the
cutoff test ``published_at < before`` is exact integer arithmetic and never depends on string
formats or offsets. A database in a file is worked through aiosqlite, off the event loop; a
private in-memory one (a card's inline evidence) through :class:`~worldsim.gateway.loopdb.
LoopConnection`, on the loop, with the same SQL.

A search before a cutoff ranks an index of the documents before that cutoff only: BM25 takes its
statistics (how many documents there are, their average length, how many hold a term) from the
index it ranks, so ranking the whole table would let documents at or after the cutoff move the
scores and the order of those before it — telling an agent that they exist.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel

from worldsim.domain.cards import EvidenceDoc, utc_iso
from worldsim.domain.errors import ConfigError
from worldsim.domain.logs import get_logger
from worldsim.domain.paths import check_file_targets, make_folder, missing_file
from worldsim.gateway.documents import (
    DOCUMENT_COLUMNS,
    IngestReport,
    SearchHit,
    StoredDocument,
    from_iso,
    to_epoch_us,
)
from worldsim.gateway.loopdb import LoopConnection
from worldsim.gateway.search_terms import QueryTerms

if TYPE_CHECKING:
    import aiosqlite

__all__ = ["EvidenceStore", "memory_store", "open_store"]

log = get_logger(__name__)

_SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    published_us INTEGER NOT NULL,
    published_at TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    url TEXT,
    source TEXT,
    stance REAL
);
CREATE INDEX IF NOT EXISTS documents_published ON documents (published_us);
CREATE VIRTUAL TABLE IF NOT EXISTS documents_fts USING fts5(
    title, text, content='documents', content_rowid='rowid', tokenize='porter unicode61'
);
"""


class EvidenceStore:
    """An open evidence database. Create one with :func:`open_store` or :func:`memory_store`."""

    def __init__(self, connection: aiosqlite.Connection | LoopConnection, *, location: str) -> None:
        self._db = connection
        self.location = location
        self._visible: dict[int, str] = {}  # cutoff (epoch µs) -> its temporary FTS5 table
        self._visible_lock = anyio.Lock()
        # Answers already given, until documents are added: agents ask the same few things.
        self._found: OrderedDict[tuple[tuple[str, ...], int, int], tuple[SearchHit, ...]] = (
            OrderedDict()
        )
        self._held: OrderedDict[tuple[str, int], bool] = OrderedDict()  # (term, cutoff) -> held
        self._asked: OrderedDict[tuple[str, int, int], tuple[SearchHit, ...]] = OrderedDict()
        self._terms_of = QueryTerms(_MEMORY)  # a query's words, its pieces' remembered
        self._read: OrderedDict[str, StoredDocument | None] = OrderedDict()
        # cutoff -> the terms its visible documents hold, where they are few (a card's own)
        self._terms: dict[int, frozenset[str] | None] = {}

    async def add(self, docs: Iterable[EvidenceDoc]) -> IngestReport:
        """Insert documents in one transaction; an id already present (or repeated) is skipped."""
        seen: set[str] = set()
        duplicates: list[str] = []
        added = 0
        try:
            for doc in docs:
                if doc.id in seen:
                    duplicates.append(doc.id)
                    continue
                seen.add(doc.id)
                cursor = await self._db.execute(
                    f"INSERT OR IGNORE INTO documents ({DOCUMENT_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        doc.id,
                        utc_iso(doc.published_at),
                        to_epoch_us(doc.published_at),
                        doc.title,
                        doc.text,
                        doc.url,
                        doc.source,
                        doc.stance,
                    ),
                )
                if cursor.rowcount == 0:
                    duplicates.append(doc.id)
                    continue
                await self._db.execute(
                    "INSERT INTO documents_fts (rowid, title, text) VALUES (?, ?, ?)",
                    (cursor.lastrowid, doc.title, doc.text),
                )
                added += 1
            await self._db.commit()
        except BaseException:
            await self._db.rollback()
            raise
        await self._forget_visible()
        return IngestReport(added=added, duplicate_ids=tuple(duplicates))

    async def search(self, query: str, *, before: datetime, k: int = 5) -> list[SearchHit]:
        """The ``k`` best BM25 matches published strictly before ``before`` (aware datetime),
        scored among those documents only, so later documents change neither scores nor order.

        Ties in score are broken by publication time (newest first), then by id. An answer
        given once is given again from memory (still a checkpoint) until documents are added.
        """
        (found,) = await self.search_many([query], before=before, k=k)
        return list(found)

    async def search_many(
        self, queries: Sequence[str], *, before: datetime, k: int = 5
    ) -> list[tuple[SearchHit, ...]]:
        """:meth:`search` for each query, the answers given before from memory with one
        checkpoint for all of them."""
        limit = to_epoch_us(before)
        asked = self._asked
        # the remembered answers first: remembering the new ones may push those out of memory
        answers = [asked.get((query, limit, k)) for query in queries]
        fresh = [query for query, found in zip(queries, answers, strict=True) if found is None]
        if fresh:  # the words of queries not asked before, looked up together
            words = dict(zip(fresh, self._terms_of.shared(fresh), strict=True))
            rests = {rest for _, rest in words.values()}
            held = await self._learn(
                itertools.chain(*rests, *[own for own, _ in words.values()]), limit
            )
            # the words every query ends with (the question) that a document holds, once
            rests_held = {rest: (frozenset(rest), _held(rest, held)) for rest in rests}
            for i, query in enumerate(queries):
                if answers[i] is None:
                    # the ranking of the words some visible document holds, shared by every
                    # query of the same such words (an actor's name before the same question)
                    own, rest = words[query]
                    kept = _held(own, held)
                    if rest:
                        in_rest, rest_kept = rests_held[rest]
                        kept += (
                            rest_kept
                            if in_rest.isdisjoint(own)
                            else tuple([term for term in rest_kept if term not in own])
                        )
                    found = self._found.get((kept, limit, k)) if kept and k >= 1 else ()
                    if found is None:
                        found = await self._ranked(kept, limit, k)
                    answers[i] = _keep(asked, (query, limit, k), found)
        await anyio.lowlevel.checkpoint()
        return [found or () for found in answers]

    async def _ranked(self, terms: tuple[str, ...], limit: int, k: int) -> tuple[SearchHit, ...]:
        """The ``k`` best matches of the terms some visible document holds.

        A term no visible document holds changes nothing in a ranking: it matches no row, adds
        exactly 0.0 to every row's BM25 sum (the other terms keep their order and their IDF), and
        gives a snippet nothing to mark. Dropping such terms lets queries that differ only there
        (an agent's name before the same question) share one ranking: a phrase lookup costs a
        twentieth of a ranked search with snippets. (The caller, :meth:`search_many`, gives
        the one checkpoint of a call.)
        """
        if not terms:
            return ()
        key = (terms, limit, k)
        found = self._found.get(key)
        if found is None:
            found = _keep(self._found, key, await self._search(" OR ".join(terms), limit, k))
        return found

    async def _learn(self, terms: Iterable[str], limit: int) -> dict[str, bool]:
        """For each phrase of ``terms``, whether a document published before ``limit`` holds
        it; those not looked up before are, one statement for many (a tick's agents each bring
        a name no document holds), :data:`_TERMS_AT_ONCE` to a statement, and remembered."""
        known: dict[str, bool] = {}
        new: list[str] = []
        for term in dict.fromkeys(terms):
            held = self._held.get((term, limit))
            if held is None:
                new.append(term)
            else:
                known[term] = held
        if not new:
            return known
        index = await self._visible_index(limit)
        vocabulary = await self._vocabulary(limit, index)
        if vocabulary is not None:  # a phrase of one word that stems to itself: is it a term?
            plain = [term for term in new if _PLAIN.fullmatch(term)]
            for term in plain:
                known[term] = _keep(self._held, (term, limit), term[1:-1] in vocabulary)
            if plain:
                new = [term for term in new if term not in known]
        for at in range(0, len(new), _TERMS_AT_ONCE):
            chunk = new[at : at + _TERMS_AT_ONCE]
            sql = (
                f"WITH asked(term) AS (VALUES {','.join(['(?)'] * len(chunk))}) "
                f"SELECT term FROM asked WHERE EXISTS "
                f"(SELECT 1 FROM temp.{index} WHERE {index} MATCH asked.term)"
            )
            async with self._db.execute(sql, chunk) as cursor:
                found = {row[0] for row in await cursor.fetchall()}
            for term in chunk:
                known[term] = _keep(self._held, (term, limit), term in found)
        return known

    async def _vocabulary(self, limit: int, index: str) -> frozenset[str] | None:
        """The terms (stemmed tokens) the documents visible before ``limit`` hold, read once
        from the index's ``fts5vocab`` table; ``None`` where they are more than
        :data:`_VOCABULARY` (a corpus, not a card's evidence: its phrases are looked up)."""
        if limit in self._terms:
            return self._terms[limit]
        await self._db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{index}_terms "
            f"USING fts5vocab(temp, {index}, row)"
        )
        async with self._db.execute(
            f"SELECT term FROM temp.{index}_terms LIMIT ?", (_VOCABULARY + 1,)
        ) as cursor:
            rows = list(await cursor.fetchall())
        found = frozenset(str(row[0]) for row in rows) if len(rows) <= _VOCABULARY else None
        self._terms[limit] = found
        return found

    async def _search(self, expression: str, limit: int, k: int) -> tuple[SearchHit, ...]:
        index = await self._visible_index(limit)
        sql = (
            "SELECT d.id, d.published_us, d.published_at, d.title, d.source, d.url, "
            f"bm25({index}) AS score, "
            f"snippet({index}, 1, '[', ']', '…', 16) "
            f"FROM temp.{index} JOIN main.documents AS d ON d.rowid = {index}.rowid "
            f"WHERE {index} MATCH ? AND d.published_us < ? "
            "ORDER BY score ASC, d.published_us DESC, d.id ASC LIMIT ?"
        )
        async with self._db.execute(sql, (expression, limit, k)) as cursor:
            rows = await cursor.fetchall()
        return tuple(
            SearchHit(
                id=r[0],
                published_us=r[1],
                published_at=from_iso(r[2]),
                title=r[3],
                source=r[4],
                url=r[5],
                score=float(r[6]),
                snippet=r[7],
            )
            for r in rows
        )

    async def _visible_index(self, limit: int) -> str:
        """The temporary FTS5 table of the documents published before ``limit`` (epoch µs),
        built on first use and kept until documents are added. Temporary tables live beside
        the connection, so a store opened read-only still gets one."""
        name = self._visible.get(limit)  # a table is named here only once it is built
        if name is not None:
            return name
        async with self._visible_lock:
            name = self._visible.get(limit)
            if name is None:
                name = f"visible_{len(self._visible)}"
                await self._db.execute(
                    f"CREATE VIRTUAL TABLE temp.{name} USING fts5("
                    "title, text, tokenize='porter unicode61')"
                )
                await self._db.execute(
                    f"INSERT INTO temp.{name} (rowid, title, text) "
                    "SELECT rowid, title, text FROM main.documents WHERE published_us < ?",
                    (limit,),
                )
                await self._db.commit()
                self._visible[limit] = name
            return name

    async def _forget_visible(self) -> None:
        async with self._visible_lock:
            for name in self._visible.values():
                await self._db.execute(f"DROP TABLE IF EXISTS temp.{name}_terms")
                await self._db.execute(f"DROP TABLE temp.{name}")
            await self._db.commit()
            self._visible.clear()
            self._terms.clear()
            self._found.clear()
            self._held.clear()
            self._asked.clear()
            self._read.clear()

    async def get(self, doc_id: str) -> StoredDocument | None:
        """The document with this id, whatever its date; ``None`` when unknown (from memory, with
        a checkpoint, when asked before)."""
        (doc,) = await self.get_many([doc_id])
        return doc

    async def get_many(self, doc_ids: Sequence[str]) -> list[StoredDocument | None]:
        """:meth:`get` for each id, those read before from memory with one checkpoint for all."""
        docs: list[StoredDocument | None] = []
        for doc_id in doc_ids:
            if doc_id in self._read:
                docs.append(self._read[doc_id])
                continue
            async with self._db.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE id = ?",
                (doc_id,),
            ) as cursor:
                row = await cursor.fetchone()
            doc = None if row is None else StoredDocument.of_row(tuple(row))
            docs.append(_keep(self._read, doc_id, doc))
        await anyio.lowlevel.checkpoint()
        return docs

    async def documents(self) -> list[StoredDocument]:
        """Every document, by date then id (for building questions from a whole store)."""
        async with self._db.execute(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents ORDER BY published_us, id"
        ) as cursor:
            rows = await cursor.fetchall()
        return [StoredDocument.of_row(tuple(row)) for row in rows]

    async def published_in(
        self, *, since: datetime, before: datetime, limit: int
    ) -> list[StoredDocument]:
        """Documents with ``since <= published_at < before``, by date then id, at most
        ``limit``."""
        async with self._db.execute(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents "
            "WHERE published_us >= ? AND published_us < ? ORDER BY published_us, id LIMIT ?",
            (to_epoch_us(since), to_epoch_us(before), limit),
        ) as cursor:
            rows = await cursor.fetchall()
        return [StoredDocument.of_row(tuple(row)) for row in rows]

    async def count(self) -> int:
        """How many documents the store holds."""
        async with self._db.execute("SELECT count(*) FROM documents") as cursor:
            row = await cursor.fetchone()
        return 0 if row is None else int(row[0])


#: Answers kept per kind, the oldest forgotten first: enough for every query and word of a tick
#: of 10⁵ actors (each searching its own name), so a tick's agents find last tick's answers.
_MEMORY = 1 << 18
_VOCABULARY = 100_000  # terms read into memory at most, to answer which phrases a document holds
# A quoted word of ASCII letters and digits ending in a digit: unicode61 keeps it one token
# (lower-cased already) and the porter stemmer leaves it as it is (its rules remove or change
# letter suffixes only), so a document holds the phrase exactly when the index holds the word
# as a term (tests/gateway/test_search_terms.py checks this against SQLite's own MATCH).
_PLAIN = re.compile(r'"[a-z0-9]*[0-9]"')
_TERMS_AT_ONCE = 500  # phrases looked up in one statement (SQLite takes 999 parameters at least)
_T = TypeVar("_T")


def _held(terms: tuple[str, ...], held: dict[str, bool]) -> tuple[str, ...]:
    """The ``terms`` some visible document holds, in order."""
    return tuple([term for term in terms if held[term]])


def _keep(memory: OrderedDict[Any, _T], key: Any, value: _T) -> _T:
    """Keep ``value`` under ``key`` in ``memory`` (forgetting the oldest when it is full, in
    constant time: a plain dict's first key is found past every slot deleted before it)."""
    if len(memory) >= _MEMORY:
        memory.popitem(last=False)
    memory[key] = value
    return value


async def _prepare(
    db: aiosqlite.Connection | LoopConnection, *, create: bool, location: str
) -> None:
    query = "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
    async with db.execute(query) as cursor:
        tables = {str(r[0]) for r in await cursor.fetchall()}
    names = tables & {"documents", "documents_fts"}
    # a file holding tables that are not ours (FTS5's shadow tables and SQLite's own are) is
    # someone else's database: never written into
    foreign = sorted(
        t for t in tables if t != "documents" and not t.startswith(("documents_fts", "sqlite_"))
    )
    if create and foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ConfigError(
            f"not a worldsim evidence database: it holds other tables ({shown})", file=location
        )
    if names == {"documents", "documents_fts"}:
        async with db.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        version = 0 if row is None else int(row[0])
        if version != _SCHEMA_VERSION:
            raise ConfigError(
                f"evidence database has schema version {version}, expected {_SCHEMA_VERSION}",
                file=location,
            )
        return
    if names or not create:
        raise ConfigError("not a worldsim evidence database", file=location)
    await db.executescript(_SCHEMA + f"PRAGMA user_version = {_SCHEMA_VERSION};")
    await db.commit()


@asynccontextmanager
async def open_store(path: str | Path, *, create: bool = False) -> AsyncIterator[EvidenceStore]:
    """Open an evidence database file and check its schema.

    Without ``create`` the file is opened read-only, so a run can never change (or, for a
    missing path, create) the database it reads; with ``create`` a missing file is created
    empty. A missing, foreign or outdated file is a :class:`ConfigError` naming it.
    """
    p = Path(path)
    if not create and not await anyio.Path(p).is_file():
        raise missing_file(p, "evidence database")
    if create:
        check_file_targets([p])
        make_folder(p.parent)
    try:
        import aiosqlite  # imported on first use: the CLI starts without it

        if create:
            db = await aiosqlite.connect(p)
        else:
            uri = (await anyio.Path(p).resolve()).as_uri() + "?mode=ro"
            db = await aiosqlite.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open evidence database: {exc}", file=p) from None
    try:
        try:
            await _prepare(db, create=create, location=str(p))
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot read evidence database: {exc}", file=p) from None
        yield EvidenceStore(db, location=str(p))
    finally:
        await db.close()


@asynccontextmanager
async def memory_store(docs: Iterable[EvidenceDoc] = ()) -> AsyncIterator[EvidenceStore]:
    """A private in-memory store holding ``docs`` (a card's inline evidence), gone on exit.

    Its statements run on the event loop (:class:`~worldsim.gateway.loopdb.LoopConnection`):
    searching and reading a few documents costs less than a hop to a thread would.
    """
    db = LoopConnection(":memory:")
    try:
        await _prepare(db, create=True, location=":memory:")
        store = EvidenceStore(db, location=":memory:")
        report = await store.add(docs)
        if report.duplicate_ids:
            log.warning("evidence_duplicates_skipped", ids=list(report.duplicate_ids))
        yield store
    finally:
        await db.close()
