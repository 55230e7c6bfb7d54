"""SQLite on the event loop, for a store's small private in-memory database.

A card's inline evidence is a handful of documents in a private ``:memory:`` database: each
statement on it takes microseconds, far less than a hop to aiosqlite's thread and back, which
thousands of concurrent agent steps would otherwise pay for every search and every read.
:class:`LoopConnection` runs the statements on the loop's own thread, with the part of
aiosqlite's interface the evidence store uses, so the store's SQL — and so its FTS5 ranking and
its cutoff — is the same whichever connection it holds.

Every statement is a checkpoint, as a hop to a thread was: agents that search or read still
yield to each other there, and in a fixed order rather than in the order a thread answers.
Databases in files keep going through aiosqlite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Sequence
from types import TracebackType
from typing import Any

import anyio.lowlevel

__all__ = ["LoopConnection"]


class _Cursor:
    """A finished statement's cursor, read without waiting."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()


class _Statement:
    """``execute``'s result: awaited for its cursor, or entered as a context that closes it."""

    def __init__(self, db: sqlite3.Connection, sql: str, parameters: Sequence[Any]) -> None:
        self._db = db
        self._sql = sql
        self._parameters = parameters
        self._cursor: sqlite3.Cursor | None = None

    async def _run(self) -> _Cursor:
        await anyio.lowlevel.checkpoint()
        self._cursor = self._db.execute(self._sql, self._parameters)
        return _Cursor(self._cursor)

    def __await__(self) -> Generator[Any, None, _Cursor]:
        return self._run().__await__()

    async def __aenter__(self) -> _Cursor:
        return await self._run()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._cursor is not None:
            self._cursor.close()


class LoopConnection:
    """A SQLite connection used from the event loop's thread (see the module's note)."""

    def __init__(self, database: str = ":memory:") -> None:
        self._db = sqlite3.connect(database)

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> _Statement:
        return _Statement(self._db, sql, parameters)

    async def executescript(self, script: str) -> None:
        await anyio.lowlevel.checkpoint()
        self._db.executescript(script)

    async def commit(self) -> None:
        self._db.commit()

    async def rollback(self) -> None:
        self._db.rollback()

    async def close(self) -> None:
        self._db.close()
