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

from worldsim.domain.errors import ConfigError, TraceError, TraceIncomplete
from worldsim.domain.files import first_error
from worldsim.trace.records import RECORD_TYPES, TRACE_ADAPTER
from worldsim.trace.writer import SEALED_TYPES, genesis_hash

__all__ = [
    "Trace",
    "TraceLine",
    "iter_trace",
    "looks_like_trace",
    "read_input_trace",
    "read_trace",
]

_SEAL = re.compile(rb'"seal":"([0-9a-f]{64})"')


class TraceLine:
    """One sound line of a trace: its bytes, its parsed envelope, and the typed record.

    The envelope (``type``, ``tl``, ``tick``, ``run``) is read when the trace is read; the typed
    record is validated against the trace schema the first time ``record`` or ``data`` is read
    (an invalid record is then a :class:`TraceError` naming the file, line and field).
    """

    __slots__ = ("_record", "number", "obj", "path", "raw")

    def __init__(self, number: int, raw: bytes, obj: dict[str, Any], path: Path) -> None:
        self.number = number
        self.raw = raw
        self.obj = obj
        self.path = path
        self._record: Any = None

    @property
    def type(self) -> str:
        return str(self.obj["type"])

    @property
    def tl(self) -> str | None:
        tl = self.obj.get("tl")
        return tl if isinstance(tl, str) else None

    @property
    def tick(self) -> int | None:
        tick = self.obj.get("tick")
        return tick if isinstance(tick, int) and not isinstance(tick, bool) else None

    @property
    def fields(self) -> dict[str, Any]:
        """The record's ``data`` as parsed JSON, without schema validation."""
        data = self.obj.get("data")
        return data if isinstance(data, dict) else {}

    @property
    def record(self) -> Any:
        """The envelope model of :mod:`worldsim.trace.records`, validated on first use."""
        if self._record is None:
            try:
                self._record = TRACE_ADAPTER.validate_python(self.obj)
            except ValidationError as exc:
                field, message = first_error(exc)
                raise TraceError(message, file=self.path, line=self.number, field=field) from None
        return self._record

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

    def validate(self) -> None:
        """Validate every record against the schema and check the writer's canonical form."""
        for line in self.lines:
            line.record  # noqa: B018  (validates)
            if _canonical(line.obj) != line.raw:
                raise TraceError(
                    "record is not in the writer's canonical form", file=self.path, line=line.number
                )

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


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def looks_like_trace(path: str | Path) -> bool:
    """Whether ``path`` starts like a trace (a JSON envelope), without reading it all."""
    with Path(path).open("rb") as fh:
        first = fh.readline()
    if not first.endswith(b"\n"):  # a single torn record: judge by the envelope's first key
        return first.lstrip().startswith(b'{"v"')
    try:
        obj = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and "type" in obj and "data" in obj and "v" in obj


def iter_trace(path: str | Path) -> Iterator[TraceLine]:
    """Stream a trace's lines, checking the hash chain as it goes.

    Each line must be a JSON object in the envelope with a known record type, the run's id,
    the next ``seq`` and the previous line's hash; a sealed record (``run_completed``,
    ``run_failed``) must match its seal and end the trace (or be followed by ``run_resumed``).
    The first bad line raises :class:`TraceError` naming it. A final line without its newline
    (a crash mid-write) is not yielded; :func:`read_trace` reports it as torn.
    """
    p = Path(path)
    if not p.is_file():
        raise TraceError("trace not found", file=p)
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise TraceError(f"cannot read trace: {exc}", file=p) from None
    with fh:
        run_id: str | None = None
        prev_hash: str | None = None
        sealed_at: int | None = None
        sealed_type = ""
        for i, raw_line in enumerate(fh):
            number = i + 1
            if not raw_line.endswith(b"\n"):
                return  # torn: the writer was cut off mid-record
            raw = raw_line[:-1]
            if sealed_at is not None:
                obj_type = _peek_type(raw)
                if not (obj_type == "run_resumed" and sealed_type == "run_failed"):
                    raise TraceError(
                        f"{sealed_type} must be the last record (or be followed by run_resumed)",
                        file=p,
                        line=sealed_at,
                    )
                sealed_at = None
            try:
                obj = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise TraceError(f"not a JSON object: {exc}", file=p, line=number) from None
            if not isinstance(obj, dict):
                raise TraceError("not a JSON object", file=p, line=number)
            kind = obj.get("type")
            if kind not in RECORD_TYPES:
                raise TraceError(f"unknown record type {kind!r}", file=p, line=number, field="type")
            line = TraceLine(number, raw, obj, p)
            if run_id is None:
                if kind != "run_started":
                    raise TraceError("the first record must be run_started", file=p, line=number)
                run = obj.get("run")
                if not isinstance(run, str) or not run:
                    raise TraceError("missing run id", file=p, line=number, field="run")
                run_id = run
                prev_hash = genesis_hash(run_id)
            if obj.get("run") != run_id:
                raise TraceError(
                    f"run id {obj.get('run')!r} differs from {run_id!r}", file=p, line=number
                )
            if obj.get("seq") != i:
                raise TraceError(
                    f"seq {obj.get('seq')} where {i} was expected", file=p, line=number
                )
            if obj.get("prev") != prev_hash:
                raise TraceError(
                    "hash chain broken: prev does not match the line before", file=p, line=number
                )
            if raw != raw.strip() or raw.startswith(b"\xef\xbb\xbf"):
                raise TraceError("stray whitespace around the record", file=p, line=number)
            if kind in SEALED_TYPES:
                if not _check_seal(raw):
                    raise TraceError("seal does not match the record", file=p, line=number)
                sealed_at, sealed_type = number, kind
            prev_hash = hashlib.sha256(raw).hexdigest()
            yield line


def _peek_type(raw: bytes) -> str | None:
    try:
        value = json.loads(raw.decode("utf-8")).get("type")
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def read_input_trace(path: str | Path) -> Trace:
    """:func:`read_trace` for a trace handed to an analysis (``score``, ``hindsight``): a trace
    that does not check out is bad input, a ConfigError (exit 2) naming the file and line."""
    try:
        return read_trace(path)
    except TraceIncomplete:
        raise
    except TraceError as exc:
        raise ConfigError(exc.message, file=exc.file, line=exc.line, field=exc.field) from None


def read_trace(path: str | Path) -> Trace:
    """Read and check a trace (see :func:`iter_trace`). A torn final line (a crash mid-write)
    is set aside, not fatal; any other damage raises :class:`TraceError` naming the first bad
    line. Records are validated against the schema when first used; :meth:`Trace.validate`
    validates them all."""
    p = Path(path)
    lines = list(iter_trace(p))
    size = p.stat().st_size
    offset = sum(len(line.raw) + 1 for line in lines)
    torn_line = len(lines) + 1 if offset < size else None
    if not lines:
        if size == 0:
            raise TraceIncomplete("trace is empty", file=p)
        raise TraceIncomplete("trace has no complete record", file=p, line=torn_line)
    return Trace(path=p, lines=tuple(lines), torn_line=torn_line, end_offset=offset)
