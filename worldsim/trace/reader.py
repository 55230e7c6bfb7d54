"""Reading a trace back: parse, validate and check the hash chain line by line."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from worldsim.domain.errors import TraceError
from worldsim.domain.files import first_error
from worldsim.trace.records import TRACE_ADAPTER
from worldsim.trace.writer import SEALED_TYPES, genesis_hash

__all__ = ["Trace", "TraceLine", "read_trace"]

_SEAL = re.compile(rb'"seal":"([0-9a-f]{64})"')


@dataclass(frozen=True, slots=True)
class TraceLine:
    number: int
    raw: bytes
    record: Any  # one of the envelope models of worldsim.trace.records

    @property
    def type(self) -> str:
        return str(self.record.type)

    @property
    def data(self) -> Any:
        return self.record.data


@dataclass(frozen=True, slots=True)
class Trace:
    """The sound lines of a trace, and what was wrong with its tail, if anything."""

    path: Path
    lines: tuple[TraceLine, ...]
    torn_line: int | None
    end_offset: int

    @property
    def run_id(self) -> str:
        return str(self.lines[0].record.run)

    @property
    def started(self) -> Any:
        return self.lines[0].data

    @property
    def terminal(self) -> TraceLine | None:
        last = self.lines[-1]
        return last if last.type in SEALED_TYPES else None

    @property
    def complete(self) -> bool:
        terminal = self.terminal
        return terminal is not None and terminal.type == "run_completed"

    @property
    def last_hash(self) -> str:
        return hashlib.sha256(self.lines[-1].raw).hexdigest()

    def of_type(self, *types: str) -> Iterator[TraceLine]:
        return (line for line in self.lines if line.type in types)

    def first(self, type_: str) -> TraceLine | None:
        return next(self.of_type(type_), None)

    @property
    def effective(self) -> list[TraceLine]:
        """The lines that count once resumes are taken into account (see trace.effective)."""
        from worldsim.trace.effective import effective_lines

        return effective_lines(self.lines)


def _check_seal(raw: bytes) -> bool:
    found = _SEAL.findall(raw)
    if len(found) != 1:
        return False
    unsealed = _SEAL.sub(b'"seal":""', raw)
    return bool(hashlib.sha256(unsealed).hexdigest() == found[0].decode())


def _next_type(raw: bytes) -> str | None:
    try:
        value = json.loads(raw.decode("utf-8")).get("type")
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def read_trace(path: str | Path) -> Trace:
    """Read and check a trace. A torn final line (a crash mid-write) is set aside, not fatal;
    any other damage raises :class:`TraceError` naming the first bad line."""
    p = Path(path)
    if not p.is_file():
        raise TraceError("trace not found", file=p)
    try:
        blob = p.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read trace: {exc}", file=p) from None
    if not blob:
        raise TraceError("trace is empty", file=p)

    chunks = blob.split(b"\n")
    tail = chunks.pop()  # b"" when the file ends with a newline
    torn_line = len(chunks) + 1 if tail else None

    lines: list[TraceLine] = []
    run_id: str | None = None
    prev_hash: str | None = None
    offset = 0
    for i, raw in enumerate(chunks):
        number = i + 1
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TraceError(f"not a JSON object: {exc}", file=p, line=number) from None
        try:
            record = TRACE_ADAPTER.validate_python(obj)
        except ValidationError as exc:
            field, message = first_error(exc)
            raise TraceError(message, file=p, line=number, field=field) from None
        if run_id is None:
            if record.type != "run_started":
                raise TraceError("the first record must be run_started", file=p, line=number)
            run_id = record.run
            prev_hash = genesis_hash(run_id)
        if record.run != run_id:
            raise TraceError(f"run id {record.run!r} differs from {run_id!r}", file=p, line=number)
        if record.seq != i:
            raise TraceError(f"seq {record.seq} where {i} was expected", file=p, line=number)
        if record.prev != prev_hash:
            raise TraceError(
                "hash chain broken: prev does not match the line before", file=p, line=number
            )
        if record.type in SEALED_TYPES:
            if not _check_seal(raw):
                raise TraceError("seal does not match the record", file=p, line=number)
            if i != len(chunks) - 1 and not (
                record.type == "run_failed" and _next_type(chunks[i + 1]) == "run_resumed"
            ):
                raise TraceError(
                    f"{record.type} must be the last record (or be followed by run_resumed)",
                    file=p,
                    line=number,
                )
        if raw != raw.strip() or raw.startswith(b"\xef\xbb\xbf"):
            raise TraceError("stray whitespace around the record", file=p, line=number)
        canonical = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
        if canonical != raw:
            raise TraceError("record is not in the writer's canonical form", file=p, line=number)
        lines.append(TraceLine(number, raw, record))
        prev_hash = hashlib.sha256(raw).hexdigest()
        offset += len(raw) + 1
    if not lines:
        raise TraceError("trace has no complete record", file=p, line=torn_line)
    return Trace(path=p, lines=tuple(lines), torn_line=torn_line, end_offset=offset)
