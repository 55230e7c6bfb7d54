"""The append-only, hash-chained JSONL trace writer (DESIGN §4.8).

Each record is serialized, chained to the previous line by SHA-256, written and flushed at once;
committed ticks and the end of the run are fsynced. Writes land in the OS page cache inline (they
take microseconds); the fsync, the part that can block, runs in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import anyio
from pydantic import BaseModel

from worldsim.domain.errors import ConfigError, TraceError

__all__ = ["SEALED_TYPES", "TraceWriter", "genesis_hash", "seal_line", "utc_stamp"]

SEALED_TYPES = frozenset({"run_completed", "run_failed"})
_SEAL_EMPTY = b'"seal":""'


def genesis_hash(run_id: str) -> str:
    """The ``prev`` of a trace's first line: the SHA-256 of the run id."""
    return hashlib.sha256(run_id.encode()).hexdigest()


def utc_stamp() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def seal_line(line: bytes) -> bytes:
    """Fill a terminal record's empty ``seal`` with the SHA-256 of the line as written unsealed.

    Every other line is protected by the next line's ``prev``; the seal protects the last one.
    """
    if line.count(_SEAL_EMPTY) != 1:
        raise TraceError("a terminal record needs exactly one empty seal field")
    digest = hashlib.sha256(line).hexdigest()
    return line.replace(_SEAL_EMPTY, b'"seal":"' + digest.encode() + b'"')


def encode_line(envelope: dict[str, Any]) -> bytes:
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


class TraceWriter:
    """Appends records to one trace file; safe to share between the tasks of one event loop."""

    def __init__(
        self,
        fh: IO[bytes],
        path: Path,
        run_id: str,
        *,
        fsync: bool = True,
        seq: int = 0,
        prev: str | None = None,
    ) -> None:
        self._fh = fh
        self.path = path
        self.run_id = run_id
        self._fsync = fsync
        self._seq = seq
        self._prev = prev if prev is not None else genesis_hash(run_id)
        self._closed = False
        self.records_written = 0

    @classmethod
    async def create(
        cls, path: str | Path, run_id: str, *, fsync: bool = True, overwrite: bool = False
    ) -> TraceWriter:
        """Open a new trace file (refusing to replace one unless ``overwrite``)."""
        p = Path(path)
        try:
            await anyio.to_thread.run_sync(lambda: p.parent.mkdir(parents=True, exist_ok=True))
            fh = await anyio.to_thread.run_sync(lambda: p.open("wb" if overwrite else "xb"))
        except FileExistsError:
            raise ConfigError("trace already exists (use --force to replace it)", file=p) from None
        except OSError as exc:
            raise ConfigError(f"cannot write the trace: {exc.strerror or exc}", file=p) from None
        return cls(fh, p, run_id, fsync=fsync)

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
    ) -> TraceWriter:
        """Reopen an existing trace to continue it after ``keep_bytes`` (dropping a torn tail)."""
        p = Path(path)

        def _open() -> IO[bytes]:
            fh = p.open("r+b")
            fh.truncate(keep_bytes)
            fh.seek(keep_bytes)
            return fh

        fh = await anyio.to_thread.run_sync(_open)
        return cls(fh, p, run_id, fsync=fsync, seq=seq, prev=prev)

    @property
    def prev(self) -> str:
        return self._prev

    @property
    def seq(self) -> int:
        return self._seq

    def _line(
        self, type_: str, data: BaseModel | dict[str, Any], tl: str | None, tick: int | None
    ) -> bytes:
        payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
        envelope = {
            "v": 1,
            "seq": self._seq,
            "ts": utc_stamp(),
            "run": self.run_id,
            "type": type_,
            "tl": tl,
            "tick": tick,
            "prev": self._prev,
            "data": payload,
        }
        line = encode_line(envelope)
        if type_ in SEALED_TYPES:
            line = seal_line(line)
        return line

    async def emit(
        self,
        type_: str,
        data: BaseModel | dict[str, Any],
        *,
        tl: str | None = None,
        tick: int | None = None,
        durable: bool = False,
    ) -> None:
        """Append one record; with ``durable`` (committed ticks, the end) also fsync."""
        if self._closed:
            raise TraceError("trace is closed", file=self.path)
        line = self._line(type_, data, tl, tick)
        self._fh.write(line + b"\n")
        self._fh.flush()
        self._prev = hashlib.sha256(line).hexdigest()
        self._seq += 1
        self.records_written += 1
        if durable and self._fsync:
            fd = self._fh.fileno()
            await anyio.to_thread.run_sync(os.fsync, fd)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            if self._fsync:
                await anyio.to_thread.run_sync(os.fsync, self._fh.fileno())
            await anyio.to_thread.run_sync(self._fh.close)
