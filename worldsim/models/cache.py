"""The response cache: SQLite through aiosqlite, keyed by request and position in the run.

One cache serves the user's every run, forecast and study: ``responses.sqlite`` in
`default_cache_dir` (``$WORLDSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/worldsim``, else
``~/.cache/worldsim``) unless ``--cache-dir`` names another folder. The key is the canonical
request hash (route, messages, output schema, temperature, seed, max tokens, and the route's own
``max_tokens_scale`` and ``temperature`` settings, which change what is sent) plus the call's site
(timeline, tick, role, agent, index), so an identical run into any output folder, a re-run or a
resume gets back exactly the replies it had, call for call, and asks no model. Modes:

* ``use`` — read, and on a miss call the model and write;
* ``refresh`` — never read, always call and overwrite;
* ``off`` — neither read nor write.

``strict`` (replay) turns a miss into `ReplayMissError` instead of a call. Only successful
replies are stored: the reply text and its call record, which never holds a key.

Several runs may share one cache file at once, in one process or several: the file is in WAL
mode (readers never wait for the writer), every write is one committed row, and a writer that
finds the file locked waits for it (``_BUSY_TIMEOUT_S``) instead of failing. A commit does not
wait for the disk (``synchronous=NORMAL``): a stored reply survives the process being killed
the moment after, and is stored within a millisecond of its arrival however busy the disk. A
cache that still cannot be read or written (a full disk, a damaged file) stops the run with one
line naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiosqlite
import anyio
from pydantic import ValidationError

from worldsim.domain.contracts import ModelRequest, ModelResponse, ModelWrapper
from worldsim.domain.errors import (
    BudgetExhausted,
    ConfigError,
    ModelError,
    ReplayMissError,
    WorldsimRuntimeError,
)
from worldsim.domain.jsonbytes import canonical_bytes
from worldsim.models.call import abandoned_call, request_hash
from worldsim.models.closing import Closing
from worldsim.models.schema import extract_json

__all__ = [
    "CACHE_FILE",
    "CacheMode",
    "CacheSummary",
    "CachedModel",
    "CachedReply",
    "ResponseCache",
    "answer_again",
    "cache_key",
    "default_cache_dir",
    "prune",
    "summarize",
]

CacheMode = Literal["use", "refresh", "off"]

CACHE_FILE = "responses.sqlite"
"""The cache's file inside its folder (the folder may hold other worldsim files)."""


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$WORLDSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/worldsim``, else ``~/.cache/worldsim``."""
    env = os.environ if environ is None else environ
    if env.get("WORLDSIM_CACHE_DIR"):
        return Path(env["WORLDSIM_CACHE_DIR"]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "worldsim"
    return Path.home() / ".cache" / "worldsim"


_BUSY_TIMEOUT_S = 60.0
"""How long a write waits for another connection's write to finish: each holds the lock for one
row's commit, so only a stalled disk makes this long."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    request_key TEXT NOT NULL,
    timeline    TEXT NOT NULL,
    tick        INTEGER NOT NULL,
    role        TEXT NOT NULL,
    agent       TEXT NOT NULL,
    idx         INTEGER NOT NULL,
    route       TEXT NOT NULL,
    reply       TEXT NOT NULL,
    call        TEXT NOT NULL,
    stored_at   TEXT NOT NULL,
    PRIMARY KEY (request_key, timeline, tick, role, agent, idx)
)
"""


@dataclass(frozen=True, slots=True)
class CachedReply:
    """A stored reply and the call record it came with."""

    reply: str
    call: dict[str, Any]


def cache_key(
    route: str, request: ModelRequest, variant: str = ""
) -> tuple[str, str, int, str, str, int]:
    """The row key of a call: request hash (output mode left out) and the call's site.

    ``variant`` names route settings that change what is sent for the same request (a
    ``max_tokens_scale``, a temperature override): ``""`` when there are none.
    """
    site = request.site
    key = request_hash(request, model=route, output_mode=None)
    if variant:
        key = hashlib.sha256(f"{key}|{variant}".encode()).hexdigest()
    return (
        key,
        site.timeline or "",
        -1 if site.tick is None else site.tick,
        site.role,
        site.agent,
        site.index,
    )


async def _set_up(db: aiosqlite.Connection) -> None:
    """Switch to WAL and create the table, waiting for another connection doing the same.

    SQLite answers "database is locked" at once, without its busy handler, when two connections
    set up a new file together (the switch to WAL needs the file to itself), so setting up is
    retried with backoff for up to ``_BUSY_TIMEOUT_S``.
    """
    delay, waited = 0.01, 0.0
    while True:
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute(_SCHEMA)
            await db.commit()
            return
        except aiosqlite.OperationalError as exc:
            if "locked" not in str(exc) or waited >= _BUSY_TIMEOUT_S:
                raise
            await db.rollback()
            await anyio.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.5)


@dataclass
class ResponseCache(Closing):
    """An open cache file. Use `ResponseCache.open` (an async context manager works too)."""

    path: Path
    mode: CacheMode
    strict: bool
    _db: aiosqlite.Connection = field(repr=False)

    @classmethod
    async def open(
        cls, path: str | Path, *, mode: CacheMode = "use", strict: bool = False
    ) -> ResponseCache:
        if mode not in ("use", "refresh", "off"):
            raise ConfigError(f"unknown cache mode {mode!r}: use, refresh or off", field="--cache")
        if strict and mode != "use":
            raise ConfigError(
                "strict replay reads the cache: use cache mode 'use'", field="--cache"
            )
        p = Path(path)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(p, timeout=_BUSY_TIMEOUT_S)
        except (OSError, aiosqlite.Error) as exc:
            raise ConfigError(f"cannot open the response cache: {exc}", file=p) from None
        try:
            await _set_up(db)
            # each stored reply commits without waiting for the disk: in WAL mode that is still
            # durable when the process dies (a kill, a crash), which is what a paid reply must
            # survive; only a power loss may roll back the last ones. Waiting for the disk held
            # every call's reply, and the call, for as long as a busy disk took to sync
            await db.execute("PRAGMA synchronous=NORMAL")
        except aiosqlite.Error as exc:
            await db.close()
            raise ConfigError(f"not a usable response cache: {exc}", file=p) from None
        return cls(p, mode, strict, db)

    async def aclose(self) -> None:
        await self._db.close()

    async def get(self, route: str, request: ModelRequest, variant: str = "") -> CachedReply | None:
        try:
            async with self._db.execute(
                "SELECT reply, call FROM responses WHERE request_key=? AND timeline=? AND tick=? "
                "AND role=? AND agent=? AND idx=?",
                cache_key(route, request, variant),
            ) as cursor:
                row = await cursor.fetchone()
        except aiosqlite.Error as exc:
            raise self._failed("read", exc) from None
        if row is None:
            return None
        return CachedReply(str(row[0]), json.loads(row[1]))

    async def put(
        self,
        route: str,
        request: ModelRequest,
        reply: str,
        call: dict[str, Any],
        variant: str = "",
    ) -> None:
        try:
            await self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *cache_key(route, request, variant),
                    route,
                    reply,
                    canonical_bytes(call).decode(),
                    datetime.now(UTC).isoformat(timespec="seconds"),
                ),
            )
            await self._db.commit()
        except aiosqlite.Error as exc:
            raise self._failed("write", exc) from None

    def _failed(self, action: str, exc: aiosqlite.Error) -> WorldsimRuntimeError:
        return WorldsimRuntimeError(f"cannot {action} the response cache: {exc}", file=self.path)

    async def count(self) -> int:
        async with self._db.execute("SELECT COUNT(*) FROM responses") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row is not None else 0


@dataclass(frozen=True, slots=True)
class CachedModel(ModelWrapper):
    """Wrapper: answer from ``cache`` where it can, otherwise ask ``inner`` and store the reply.

    A hit returns the stored reply with its original call record, marked ``cache: "hit"``,
    ``attempts: 0``, ``latency_s: 0`` and no retried errors.
    """

    cache: ResponseCache
    variant: str = ""
    """The route's settings that change what is sent (see `cache_key`)."""

    async def request(self, request: ModelRequest) -> ModelResponse:
        if self.cache.mode == "off":
            response = await self.inner.request(request)
            return ModelResponse(response.output, response.text, {**response.call, "cache": "off"})
        if self.cache.mode == "use":
            hit = await self._lookup(request)
            if hit is not None:
                return hit
            if self.cache.strict:
                site = request.site
                raise ReplayMissError(
                    f"strict replay: no cached reply for {self.route} role {site.role} "
                    f"agent {site.agent} call {site.index}",
                    timeline=site.timeline,
                    tick=site.tick,
                )
        try:
            response = await self.inner.request(request)
        except (ModelError, BudgetExhausted) as exc:
            if exc.call:
                exc.call["cache"] = "miss"
            raise
        except anyio.get_cancelled_exc_class() as cancelled:
            abandoned = abandoned_call(cancelled, take=False)
            if abandoned is not None:
                abandoned["cache"] = "miss"
            raise
        call = {**response.call, "cache": "miss"}
        with anyio.CancelScope(shield=True):  # a paid reply is kept even if the run is ending
            await self.cache.put(self.route, request, response.text, call, self.variant)
        return ModelResponse(response.output, response.text, call)

    async def _lookup(self, request: ModelRequest) -> ModelResponse | None:
        entry = await self.cache.get(self.route, request, self.variant)
        if entry is None:
            return None
        return await answer_again(request, entry.reply, entry.call)


async def answer_again(
    request: ModelRequest, reply: str, call: Mapping[str, Any]
) -> ModelResponse | None:
    """``request`` answered with a reply it was given before and that call's record, marked
    ``cache: "hit"``, ``attempts: 0``, ``latency_s: 0`` and no retried errors; ``None`` when
    the reply does not validate as the request's output.

    The tools the call ran before its reply run again, so that what they log (the gateway's
    retrievals) is the same for an answer given again as for a live one."""
    try:
        output = request.output_type.model_validate_json(extract_json(reply))
    except ValidationError:
        return None
    again = {**call, "cache": "hit", "attempts": 0, "latency_s": 0.0, "errors": []}
    if request.tool_handler is not None:
        for tool in call.get("tool_calls") or ():
            await request.tool_handler(str(tool["name"]), str(tool["arguments"]))
    return ModelResponse(output, reply, again)


@dataclass(frozen=True, slots=True)
class CacheSummary:
    """What `worldsim cache info` shows of a cache file."""

    path: Path
    bytes: int
    entries: int
    oldest: str | None
    newest: str | None
    routes: dict[str, int]


def _connect(path: Path) -> sqlite3.Connection:
    """A plain connection for the cache commands; a file that is not a cache is a `ConfigError`."""
    try:
        db = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S)
        db.execute("SELECT request_key, route, stored_at FROM responses LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise ConfigError(f"not a usable response cache: {exc}", file=path) from None
    return db


def summarize(path: Path) -> CacheSummary:
    """Size (with SQLite's write-ahead files), entries, their age range and count per route."""
    size = sum(
        p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.is_file()
    )
    if not path.is_file():
        return CacheSummary(path, size, 0, None, None, {})
    db = _connect(path)
    try:
        n, oldest, newest = db.execute(
            "SELECT COUNT(*), MIN(stored_at), MAX(stored_at) FROM responses"
        ).fetchone()
        routes = dict(
            db.execute("SELECT route, COUNT(*) FROM responses GROUP BY route ORDER BY route")
        )
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot read the response cache: {exc}", file=path) from None
    finally:
        db.close()
    return CacheSummary(
        path, size, int(n), oldest, newest, {str(k): int(v) for k, v in routes.items()}
    )


def prune(path: Path, *, stored_before: datetime | None) -> int:
    """Delete the replies stored before ``stored_before`` (all of them for ``None``); returns
    how many went. The file is compacted afterwards."""
    if not path.is_file():
        return 0
    db = _connect(path)
    try:
        if stored_before is None:
            gone = db.execute("DELETE FROM responses").rowcount
        else:
            cut = stored_before.astimezone(UTC).isoformat(timespec="seconds")
            gone = db.execute("DELETE FROM responses WHERE stored_at < ?", (cut,)).rowcount
        db.commit()
        db.execute("VACUUM")
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot prune the response cache: {exc}", file=path) from None
    finally:
        db.close()
    return int(gone)
