"""Reading a trace back: the one module that parses trace files (DESIGN §4.8).

It streams a trace line by line, checks each envelope, the hash chain and the seals as it goes,
and keeps only each line's bytes and envelope; a record's data is parsed again, and validated
against the schema, when it is first used. :func:`iter_effective` yields the run's effective
history (a resumed run's voided ticks left out, see :mod:`worldsim.trace.effective`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from worldsim.domain.errors import TraceError, TraceIncomplete
from worldsim.domain.paths import missing_file
from worldsim.domain.version import __version__
from worldsim.trace.effective import effective_lines, stream_effective
from worldsim.trace.lines import (
    TraceLine,
    check_line,
    decode_line,
    in_writers_form,
    parse_line,
    seal_holds,
    whole_record,
)
from worldsim.trace.records import (
    FORMAT_VERSION,
    LAST_READER_OF,
    RECORD_TYPES,
    ProposalData,
    RetrievalData,
)
from worldsim.trace.writer import SEALED_TYPES, genesis_hash

__all__ = [
    "Proposed",
    "Trace",
    "TraceLine",
    "TraceStream",
    "check_line",
    "in_writers_form",
    "iter_effective",
    "iter_trace",
    "looks_like_trace",
    "parse_line",
    "read_trace",
    "trace_head",
]


class Proposed(NamedTuple):
    """A proposal as a trace records it: its timeline, its tick and its record data."""

    tl: str | None
    tick: int | None
    data: ProposalData


@dataclass(frozen=True, slots=True)
class Trace:
    """The sound lines of a trace, and what was wrong with its tail, if anything.

    ``torn_line`` numbers a final line without its newline, which does not count: the writer
    ends every record with one, so a record is committed when its newline is written.
    ``unterminated`` says that line is nonetheless a whole record (its JSON closed, chained to
    the line before): the file lost only its last byte, not a record cut off mid-write.
    """

    path: Path
    lines: tuple[TraceLine, ...]
    torn_line: int | None
    end_offset: int
    unterminated: bool = False

    @property
    def run_id(self) -> str:
        return str(self.lines[0].record.run)

    @property
    def started(self) -> Any:
        return self.lines[0].data

    def __iter__(self) -> Iterator[TraceLine]:
        return iter(self.lines)

    @property
    def records(self) -> int:
        return len(self.lines)

    @property
    def last(self) -> TraceLine:
        return self.lines[-1]

    @property
    def terminal(self) -> TraceLine | None:
        return _terminal(self.lines[-1])

    @property
    def complete(self) -> bool:
        return _completes(self.terminal)

    def tail(self) -> tuple[int | None, bool]:
        """``(torn_line, unterminated)``, as :meth:`TraceStream.tail` says them."""
        return self.torn_line, self.unterminated

    @property
    def head(self) -> str:
        """The trace's anchor: the SHA-256 of its last complete line (what the ``prev`` of a
        following record would carry). It fixes every line before it through the chain, so a
        head recorded elsewhere (a prereg lock, a printed run summary) pins the whole trace."""
        return _head(self.lines[-1])

    def of_type(self, *types: str) -> Iterator[TraceLine]:
        return (line for line in self.lines if line.type in types)

    def first(self, type_: str) -> TraceLine | None:
        return next(self.of_type(type_), None)

    def accesses(self) -> list[RetrievalData]:
        """Every gateway access the trace records, as the gateway logged it: the accesses of
        each ``retrievals`` record."""
        found: list[RetrievalData] = []
        for line in self.of_type("retrievals"):
            found.extend(line.data.records(line.tl, line.tick))
        return found

    def proposals(self) -> list[Proposed]:
        """Every proposal the trace records, where it was made, in the order written: the items
        of each ``proposals`` record."""
        return [
            Proposed(line.tl, line.tick, p)
            for line in self.of_type("proposals")
            for p in line.data.proposals
        ]

    def validate(self) -> None:
        """Validate every record against the schema and check the writer's canonical form."""
        for line in self.lines:
            check_line(line)

    @property
    def effective(self) -> list[TraceLine]:
        """The lines that count once resumes are taken into account (see trace.effective)."""
        return effective_lines(self.lines)


def _head(last: TraceLine) -> str:
    return hashlib.sha256(last.raw).hexdigest()


def _terminal(last: TraceLine | None) -> TraceLine | None:
    return last if last is not None and last.type in SEALED_TYPES else None


def _completes(terminal: TraceLine | None) -> bool:
    return terminal is not None and terminal.type == "run_completed"


def looks_like_trace(path: str | Path) -> bool:
    """Whether ``path`` starts like a trace (a JSON envelope), without reading it all: its
    first line opens with the envelope's first key as the writer writes it (so a trace whose
    first line is damaged is still a trace, for the reader to refuse), or is an envelope."""
    with Path(path).open("rb") as fh:
        first = fh.readline()
    if first.lstrip().startswith(b'{"v"'):
        return True
    try:
        obj = parse_line(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and "type" in obj and "data" in obj and "v" in obj


def iter_trace(path: str | Path, *, parsed: bool = False) -> Iterator[TraceLine]:
    """Stream a trace's lines, checking the hash chain as it goes.

    Each line must be a JSON object in the envelope with a known record type, the run's id,
    the next ``seq`` and the previous line's hash; a sealed record (``run_completed``,
    ``run_failed``) must match its seal and end the trace (or be followed by ``run_resumed``).
    The first bad line raises :class:`TraceError` naming it (anything after ``run_completed``,
    a blank line or a few bytes, included). A final line without its newline (a crash
    mid-write) is not yielded; :func:`read_trace` reports it as torn. A whole record
    followed by one byte other than its newline was edited, not cut off, and is refused.

    With ``parsed``, each line carries the JSON parsed here (and whether msgspec's encoding of
    it can stand in for the writer's), for a consumer that checks every line as it comes
    (``verify``); without, a line keeps its bytes and is parsed again on use, which keeps the
    lines a consumer holds cheap for the collector.
    """
    p = Path(path)
    if not p.is_file():
        raise missing_file(p, "trace")
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
                if whole_record(raw_line[:-1], i, prev_hash):
                    raise TraceError(
                        f"the record ends in {raw_line[-1:]!r} where its newline should be",
                        file=p,
                        line=number,
                    )
                if sealed_type != "run_completed":
                    return  # torn: the writer was cut off mid-record
            raw = raw_line[:-1] if raw_line.endswith(b"\n") else raw_line
            if sealed_at is not None:
                obj_type = _peek_type(raw)
                if not (obj_type == "run_resumed" and sealed_type == "run_failed"):
                    raise TraceError(
                        f"something follows {sealed_type} (line {sealed_at}), which must be "
                        "the last record (or be followed by run_resumed)",
                        file=p,
                        line=number,
                    )
                sealed_at = None
            try:
                obj, plain = decode_line(raw) if parsed else (parse_line(raw), False)
            except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
                raise TraceError(f"not a JSON object: {exc}", file=p, line=number) from None
            except RecursionError:
                raise TraceError(
                    "not a JSON object: nested too deeply", file=p, line=number
                ) from None
            if not isinstance(obj, dict):
                raise TraceError("not a JSON object", file=p, line=number)
            kind = obj.get("type")
            if kind not in RECORD_TYPES:
                raise TraceError(f"unknown record type {kind!r}", file=p, line=number, field="type")
            version = obj.get("v")
            if type(version) is not int or version != FORMAT_VERSION:
                raise _other_format(version, p, number)
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
                    f"seq {obj.get('seq')!r} where {i} was expected", file=p, line=number
                )
            if obj.get("prev") != prev_hash:
                before = "the run id" if i == 0 else f"line {i}"
                raise TraceError(
                    f"hash chain broken: prev is not the hash of {before}",
                    file=p,
                    line=number,
                )
            if raw != raw.strip() or raw.startswith(b"\xef\xbb\xbf"):
                raise TraceError("stray whitespace around the record", file=p, line=number)
            if kind in SEALED_TYPES:
                if not seal_holds(raw):
                    raise TraceError("seal does not match the record", file=p, line=number)
                sealed_at, sealed_type = number, kind
            prev_hash = hashlib.sha256(raw).hexdigest()
            tl, tick = obj.get("tl"), obj.get("tick")
            yield TraceLine(
                number,
                raw,
                p,
                type=kind,
                tl=tl if isinstance(tl, str) else None,
                tick=tick if isinstance(tick, int) and not isinstance(tick, bool) else None,
                run=run_id,
                parsed=(obj, plain) if parsed else None,
            )


def _other_format(version: object, path: Path, number: int) -> TraceError:
    """A line of another trace format than this worldsim's: one line naming its version and,
    for a format an earlier release wrote, the release that reads it."""
    if isinstance(version, int) and not isinstance(version, bool) and version in LAST_READER_OF:
        message = (
            f"trace format v{version}: worldsim {__version__} reads format v{FORMAT_VERSION} "
            f"only; worldsim {LAST_READER_OF[version]} reads v{version}"
        )
    else:
        message = f"trace format {version!r} is not v{FORMAT_VERSION}, the one worldsim reads"
    return TraceError(message, file=path, line=number, field="v")


def _peek_type(raw: bytes) -> str | None:
    try:
        value = parse_line(raw).get("type")
    except (ValueError, RecursionError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def iter_effective(path: str | Path) -> Iterator[TraceLine]:
    """Stream a trace's effective lines (see :mod:`worldsim.trace.effective`), checking the
    chain as it goes (see :func:`iter_trace`): a resumed run's voided records are left out.
    A line is yielded once it is known to count, so a consumer holds at most the open tick of
    each timeline; damage anywhere still raises, when the reader reaches it."""
    return stream_effective(iter_trace(path))


class TraceStream:
    """A trace read as a stream (:func:`iter_trace`, ``parsed`` as there), keeping what is
    known of it as it goes: how many sound lines and bytes were read, and the last line; once
    the lines are exhausted, :meth:`tail` says what follows them."""

    def __init__(self, path: str | Path, *, parsed: bool = False) -> None:
        self.path = Path(path)
        self.parsed = parsed
        self.records = 0
        self.offset = 0
        self.last: TraceLine | None = None

    def __iter__(self) -> Iterator[TraceLine]:
        for line in iter_trace(self.path, parsed=self.parsed):
            self.records += 1
            self.offset += len(line.raw) + 1
            self.last = line
            yield line

    @property
    def head(self) -> str:
        """The head of the lines read so far (see :attr:`Trace.head`); there must be one."""
        if self.last is None:
            raise TraceIncomplete("trace has no complete record", file=self.path)
        return _head(self.last)

    @property
    def terminal(self) -> TraceLine | None:
        """The last line read, if it is a sealed (terminal) record."""
        return _terminal(self.last)

    @property
    def complete(self) -> bool:
        return _completes(self.terminal)

    def tail(self) -> tuple[int | None, bool]:
        """``(torn_line, unterminated)`` after the lines read (see :class:`Trace`); raises
        :class:`TraceIncomplete` when none was sound."""
        last = self.last.raw if self.last is not None else None
        return _tail(self.path, self.records, self.offset, last)


def read_trace(path: str | Path) -> Trace:
    """Read and check a trace (see :func:`iter_trace`). A torn final line (a crash mid-write)
    is set aside, not fatal; any other damage raises :class:`TraceError` naming the first bad
    line. Records are validated against the schema when first used; :meth:`Trace.validate`
    validates them all."""
    stream = TraceStream(path)
    lines = tuple(stream)
    torn_line, unterminated = stream.tail()
    return Trace(
        path=stream.path,
        lines=lines,
        torn_line=torn_line,
        end_offset=stream.offset,
        unterminated=unterminated,
    )


def _tail(path: Path, records: int, offset: int, last: bytes | None) -> tuple[int | None, bool]:
    """What follows the ``records`` sound lines of a trace (``offset`` bytes, the last one
    ``last``): ``(torn_line, unterminated)``. A trace with no sound line raises
    :class:`TraceIncomplete` (only a torn first line); an empty file is no trace at all, a
    :class:`TraceError`."""
    size = path.stat().st_size
    torn_line = records + 1 if offset < size else None
    unterminated = False
    if torn_line is not None:
        with path.open("rb") as fh:
            fh.seek(offset)
            tail = fh.read()
        prev = hashlib.sha256(last).hexdigest() if last is not None else None
        unterminated = whole_record(tail, records, prev)
    if not records:
        if size == 0:  # not even a run id: no evidence of a trace, nothing cut off
            raise TraceError("trace is empty", file=path)
        what = "a whole record without its newline" if unterminated else "one torn line"
        raise TraceIncomplete(f"trace has no complete record ({what})", file=path, line=torn_line)
    return torn_line, unterminated


def trace_head(path: str | Path) -> str:
    """The head of the trace at ``path`` (see :attr:`Trace.head`), read through the checking
    reader: what a lock records to pin a trace. Raises :class:`TraceError` naming the first bad
    line, :class:`TraceIncomplete` for a trace with no complete record. Streamed: only the
    last line is held."""
    stream = TraceStream(path)
    for _ in stream:
        pass
    stream.tail()  # no complete record: raises, saying what the file holds
    return stream.head
