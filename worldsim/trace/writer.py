"""The append-only, hash-chained JSONL trace writer (DESIGN §4.8).

Each record is serialized, chained to the previous line by SHA-256 and written at once, with no
buffer in between (a tick's proposals together, in one write); committed ticks and the end of
the run are fsynced. A small record lands in the OS page cache inline (it takes microseconds);
a large one (a tick of 10⁵ actors is tens of MB) is written by the writer's own thread while
the run goes on, records always in their order; a committed tick's fsync, the part that can
block, is that thread's too, after every write before it. Closing the writer waits for all of
it. One writer per trace: the file is locked (:class:`TraceLock`) for the writer's life.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel

from worldsim.domain.errors import ConfigError, TraceError
from worldsim.domain.jsonbytes import compact_into, msgspec_bytes
from worldsim.domain.paths import flock_holder
from worldsim.trace.records import FORMAT_VERSION

if TYPE_CHECKING:
    from worldsim.trace.signing import Signer

__all__ = [
    "SEALED_TYPES",
    "TRACE_EXISTS",
    "TraceLock",
    "TraceWriter",
    "genesis_hash",
    "record_line",
    "seal_line",
    "utc_stamp",
]

TRACE_EXISTS = "trace already exists (--force replaces it; overwrite=True in Python)"
"""The refusal of a new trace where one is: the command's flag and the library's keyword."""

SEALED_TYPES = frozenset({"run_completed", "run_failed"})
LATER_BYTES = 1 << 20
"""A record this long or longer is written by the writer's thread while the run goes on."""
PENDING_BYTES = 1 << 26
"""At most this much of the trace waits for the writer's thread; the next record then waits."""
_SEAL_EMPTY = b'"seal":""'
_SIGNATURE_EMPTY = b'"signature":""'


def genesis_hash(run_id: str) -> str:
    """The ``prev`` of a trace's first line: the SHA-256 of the run id."""
    return hashlib.sha256(run_id.encode()).hexdigest()


def utc_stamp() -> str:
    """The time now in UTC as ISO 8601 with microseconds and ``Z`` (a trace stamps every
    record: the date and time up to the second are rendered once a second)."""
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    return f"{_second(seconds)}{micros:06d}Z"


@functools.lru_cache(maxsize=2)
def _second(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.")


def seal_line(line: bytes, signer: Signer | None = None) -> bytes:
    """Fill a terminal record's empty ``seal`` with the SHA-256 of the line as written unsealed,
    then, with a ``signer``, its empty ``signature`` with the signer's signature of the seal.

    Every other line is protected by the next line's ``prev``; the seal protects the last one.
    The seal is taken with ``"signature":""``, so the rule stays one hash over the line.
    """
    if line.count(_SEAL_EMPTY) != 1:
        raise TraceError("a terminal record needs exactly one empty seal field")
    digest = hashlib.sha256(line).hexdigest()
    line = line.replace(_SEAL_EMPTY, b'"seal":"' + digest.encode() + b'"')
    if signer is None:
        return line
    if line.count(_SIGNATURE_EMPTY) != 1:
        raise TraceError("a signed record needs exactly one empty signature field")
    return line.replace(_SIGNATURE_EMPTY, b'"signature":"' + signer.sign(digest).encode() + b'"')


def record_line(
    header: dict[str, Any], data: Any, floats: Iterable[float] | None = None
) -> bytearray:
    """A record as the trace holds it, and the newline that ends the line: exactly
    ``json.dumps({**header, "data": data}, separators=(",", ":"), ensure_ascii=False,
    allow_nan=False)`` in UTF-8 (so NaN and infinities raise), made in one buffer (a tick's
    record may be tens of MB: it is not copied once more to be joined or ended). The ``header``
    is the writer's (at least one field; ints, strings and ``None``, which msgspec writes as the
    standard library does), so only ``data`` is looked at for what msgspec could write otherwise
    (see :mod:`worldsim.domain.jsonbytes`); ``floats``, when given, are every float ``data``
    holds."""
    line = bytearray(msgspec_bytes(header)[:-1])
    line += b',"data":'
    compact_into(line, data, floats)
    line += b"}\n"
    return line


_OPEN_FLAGS = {
    "new": os.O_CREAT | os.O_EXCL,
    "replace": os.O_CREAT,
    "existing": 0,
}


class TraceLock:
    """A trace file held open under an exclusive ``flock``: the right to write that trace.

    The lock is on the trace file itself, taken before the file is truncated or read for a
    resume, so a second writer fails at once and leaves the first one's file untouched. The
    kernel releases it when the file is closed or the process dies, so a crash leaves nothing
    behind that could block the next run.
    """

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def take(cls, path: str | Path, how: Literal["new", "replace", "existing"]) -> TraceLock:
        """Open ``path`` for writing and lock it: a ``new`` file (refused if it exists), one
        to ``replace`` (emptied once locked), or an ``existing`` one to continue."""
        p = Path(path)
        try:
            if how != "existing":
                p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot write the trace: {exc.strerror or exc}", file=p) from None
        try:
            fd = os.open(p, os.O_RDWR | os.O_CLOEXEC | _OPEN_FLAGS[how], 0o666)
        except FileExistsError:
            raise ConfigError(TRACE_EXISTS, file=p) from None
        except FileNotFoundError:
            raise TraceError("trace not found", file=p) from None
        except OSError as exc:
            raise ConfigError(f"cannot write the trace: {exc.strerror or exc}", file=p) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if how == "replace":
                os.ftruncate(fd, 0)
        except BlockingIOError:
            pid = flock_holder(fd)
            os.close(fd)
            holder = f" (pid {pid})" if pid is not None else ""
            raise ConfigError(f"another run is writing this trace{holder}", file=p) from None
        except OSError as exc:
            os.close(fd)
            raise ConfigError(f"cannot write the trace: {exc.strerror or exc}", file=p) from None
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, p)

    @property
    def held(self) -> bool:
        return self.fd >= 0

    def __enter__(self) -> TraceLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        """Close the file, which releases the lock; calling it again does nothing."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


class TraceWriter:
    """Appends records to one trace file; safe to share between the tasks of one event loop.

    The writer owns its file's :class:`TraceLock` until :meth:`aclose`. A failed write (disk
    full, file too large, an I/O error) raises :class:`TraceError` and breaks the writer: the
    file is cut back to its last complete record, and every later call raises the same error,
    so the trace stays resumable and no half-record is ever followed by another. A failed
    write or fsync of the writer's thread is raised by the next call once it has happened,
    and at the latest by :meth:`flush` or :meth:`aclose`.
    """

    def __init__(
        self,
        lock: TraceLock,
        run_id: str,
        *,
        fsync: bool = True,
        seq: int = 0,
        prev: str | None = None,
        offset: int = 0,
    ) -> None:
        self._lock = lock
        self.path = lock.path
        self.run_id = run_id
        self._fsync = fsync
        self._seq = seq
        self._prev = prev if prev is not None else genesis_hash(run_id)
        self._offset = offset
        self._closed = False
        self.failure: TraceError | None = None
        # signs the terminal record's seal when set (``run --sign-key``); never written out
        self.signer: Signer | None = None
        # handed (type, tl, tick, data) of every record once chained, when set: the data
        # as written (JSON-ready), to read and not to change
        self.tap: Callable[[str, str | None, int | None, dict[str, Any]], None] | None = None
        self._thread: ThreadPoolExecutor | None = None  # made for the first large record
        self._pending: deque[tuple[Future[None], int]] = deque()  # writes not yet done
        self._reported = False  # whether a call raised ``failure``
        self.types_written: set[str] = set()  # the record types this writer has chained

    @classmethod
    async def create(
        cls, path: str | Path, run_id: str, *, fsync: bool = True, overwrite: bool = False
    ) -> TraceWriter:
        """Open a new trace file (refusing to replace one unless ``overwrite``), locked."""
        lock = await anyio.to_thread.run_sync(
            TraceLock.take, path, "replace" if overwrite else "new"
        )
        return cls(lock, run_id, fsync=fsync)

    @classmethod
    async def append_to(
        cls,
        path: str | Path,
        run_id: str,
        *,
        seq: int,
        prev: str,
        keep_bytes: int,
        fsync: bool = True,
        lock: TraceLock | None = None,
    ) -> TraceWriter:
        """Reopen an existing trace to continue it after ``keep_bytes`` (dropping a torn tail).

        ``lock`` is the trace's lock when the caller took it before reading the trace (as a
        resume must, or another writer could append between the read and the cut).
        """
        if lock is None:
            lock = await anyio.to_thread.run_sync(TraceLock.take, path, "existing")
        try:
            os.ftruncate(lock.fd, keep_bytes)
            os.lseek(lock.fd, keep_bytes, os.SEEK_SET)
        except OSError as exc:
            lock.release()
            raise TraceError(f"cannot write the trace: {exc.strerror}", file=lock.path) from None
        return cls(lock, run_id, fsync=fsync, seq=seq, prev=prev, offset=keep_bytes)

    @property
    def prev(self) -> str:
        return self._prev

    @property
    def seq(self) -> int:
        return self._seq

    async def emit(
        self,
        type_: str,
        data: BaseModel | dict[str, Any],
        *,
        tl: str | None = None,
        tick: int | None = None,
        durable: bool = False,
        floats: Iterable[float] | None = None,
    ) -> None:
        """Append one record, chained to the one before, in one write (all of it, or after a
        failed write none); with ``durable`` (committed ticks, the end) the file is fsynced
        once every record up to it is written, by the writer's thread while the run goes on
        (:meth:`aclose` waits for it). ``floats``:
        every float a ``data`` dict holds, where its maker knows them (the record's bytes
        are then not looked at for floats msgspec writes otherwise; see
        :mod:`worldsim.domain.jsonbytes`)."""
        if self._closed:
            raise TraceError("trace is closed", file=self.path)
        await self._room()
        # from here to the chain's update nothing awaits: records emitted by several tasks
        # of the loop are each chained to the one before
        payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
        if type_ in SEALED_TYPES and self.signer is not None:
            payload = {**payload, "key_id": self.signer.key_id}  # sealed with the record
        header = {
            "v": FORMAT_VERSION,
            "seq": self._seq,
            "ts": utc_stamp(),
            "run": self.run_id,
            "type": type_,
            "tl": tl,
            "tick": tick,
            "prev": self._prev,
        }
        line = record_line(header, payload, floats)
        if type_ in SEALED_TYPES:
            line = bytearray(seal_line(bytes(line[:-1]), self.signer) + b"\n")
        written = memoryview(line)
        self._queue(written)
        self._seq += 1
        self._prev = hashlib.sha256(written[:-1]).hexdigest()
        self.types_written.add(type_)
        if self.tap is not None:
            self.tap(type_, tl, tick, payload)
        if durable and self._fsync:
            self._later(self._sync, 0)

    async def _room(self) -> None:
        """Wait while ``PENDING_BYTES`` or more wait for the writer's thread; raise if a
        write failed."""
        pending = self._waiting()
        while pending and sum(size for _, size in pending) >= PENDING_BYTES:
            await anyio.to_thread.run_sync(pending.popleft()[0].result)
        self._raise_failure()

    def _waiting(self) -> deque[tuple[Future[None], int]]:
        """The thread's jobs not yet done (those done, first in first out, let go)."""
        pending = self._pending
        while pending and pending[0][0].done():
            pending.popleft()
        return pending

    def _raise_failure(self) -> None:
        if self.failure is not None:
            self._reported = True
            raise self.failure

    def _queue(self, line: memoryview) -> None:
        """Write ``line`` now, or hand it to the writer's thread: a large one, or any while
        the thread still has lines to write (the lines keep their order)."""
        if not self._waiting() and len(line) < LATER_BYTES:
            try:
                self._write(line)
            except TraceError:
                self._reported = True
                raise
            return
        self._later(self._write_later, len(line), line)

    def _later(self, job: Callable[..., None], size: int, *args: Any) -> None:
        """Hand ``job`` to the writer's thread, behind every write before it."""
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="trace-writer")
        self._pending.append((self._thread.submit(job, *args), size))

    def _write_later(self, line: memoryview) -> None:
        if self.failure is None:  # after a failed write, the lines queued behind it are dropped
            with contextlib.suppress(TraceError):  # kept as the writer's failure
                self._write(line)

    def _sync(self) -> None:
        if self.failure is None:
            try:
                os.fsync(self._lock.fd)
            except OSError as exc:
                self._broken(exc)

    async def flush(self) -> None:
        """Wait until every record emitted so far is written (and fsynced, where one was
        durable); raise if a write failed."""
        while self._pending:
            await anyio.to_thread.run_sync(self._pending.popleft()[0].result)
        self._raise_failure()

    def _write(self, records: bytes | memoryview) -> None:
        """Write whole records, or cut the file back to where they started and raise."""
        view = memoryview(records)
        try:
            while view:
                view = view[os.write(self._lock.fd, view) :]
        except OSError as exc:
            with contextlib.suppress(OSError):  # best effort: a torn tail is still readable
                os.ftruncate(self._lock.fd, self._offset)
            raise self._broken(exc) from None
        self._offset += len(records)

    def _broken(self, exc: OSError) -> TraceError:
        self.failure = TraceError(f"cannot write the trace: {exc.strerror or exc}", file=self.path)
        return self.failure

    async def aclose(self) -> None:
        """Make the trace durable (unless a write failed) and release its lock; raise a
        failed write that no call has raised yet."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            reported = self._reported
            try:
                # the file is closed only once the writer's thread is done with it
                with contextlib.suppress(TraceError):  # kept as the writer's failure
                    await self.flush()
                if self._thread is not None:
                    self._thread.shutdown()
                if self._fsync and self.failure is None:
                    await anyio.to_thread.run_sync(os.fsync, self._lock.fd)
            except OSError as exc:
                raise self._broken(exc) from None
            finally:
                self._lock.release()
            if not reported:  # a failed write that no call has raised yet
                self._raise_failure()
