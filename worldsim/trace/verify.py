"""``verify``: the hash chain, the seal, every record's schema and form, every invariant replay
can check, what a finished run ends with, and on request the trace's head (its anchor), the
signature of its final record and the canonical hash. Every reader of a trace for a result
reads it through the same pass (:class:`Verifying`), so each accepts exactly what ``verify``
accepts.

The trace is checked as it streams past, in one pass: what is held at any time is each
timeline's open tick and the leaves (and, for the canonical hash, the content it covers), never
the whole file.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Collection, Generator, Iterable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldsim.domain.cards import public_card_hash
from worldsim.domain.errors import TraceError, TraceIncomplete
from worldsim.trace.canonical import CanonicalHash
from worldsim.trace.effective import stream_effective
from worldsim.trace.ending import Ending
from worldsim.trace.forecast import RecordView, record_view
from worldsim.trace.reader import Trace, TraceLine, TraceStream, check_line, read_trace
from worldsim.trace.records import ExtractionData
from worldsim.trace.replay import (
    REPLAYED_TYPES,
    ReplayResult,
    TickStep,
    extract_again,
    replay_direct,
    replay_lines,
)

if TYPE_CHECKING:
    from worldsim.trace.signing import PublicKey

__all__ = [
    "Verification",
    "Verifying",
    "canonical_hash",
    "replay",
    "stream_records",
    "trace_records",
    "verified_lines",
    "verify_trace",
]


@dataclass(frozen=True, slots=True)
class Verification:
    """What ``verify`` found. A trace is *sound* when every complete line checks out.

    ``head`` is ``None`` (and ``recorded``, ``canonical`` with it) when the file holds only a
    torn first line; ``note`` then says so. An empty file is refused (TraceError). ``key_id``
    names the key that signed the final terminal record ("" when unsigned);
    ``signature_checked`` says a public key confirmed it. ``recorded`` is the trace's extraction
    (``None`` for a run that did not get that far), ``recomputed`` the same extraction computed
    again from the replayed leaves, over ``mass_sum``. ``canonical`` is the canonical hash when
    it was asked for.
    """

    path: Path
    records: int
    torn_line: int | None
    unterminated: bool
    complete: bool
    terminal: str | None
    head: str | None
    key_id: str
    signature_checked: bool
    canonical: str | None
    recorded: ExtractionData | None = None
    recomputed: ExtractionData | None = None
    mass_sum: float | None = None
    note: str | None = None
    failure: str | None = None
    """The error a ``run_failed`` final record gives (``None`` when it is not one)."""

    @property
    def why_incomplete(self) -> str:
        """Why the trace holds no result, in a few words ("" when it is complete)."""
        if self.complete:
            return ""
        if self.failure is not None:
            return f"the run failed: {self.failure}"
        if self.head is None:
            return f"cut off in its first record ({self.note})"
        return f"cut off: it ends with {self.terminal or 'no terminal record'}"

    @property
    def matches(self) -> bool:
        """The recomputed extraction is the recorded one (a trace without one has none)."""
        return self.recorded is not None and self.recorded == self.recomputed

    @property
    def exit_code(self) -> int:
        """0 sound and complete; 3 sound but cut off (a torn tail, no terminal record, or only
        a torn first line: every non-empty prefix of a sound trace is one of these)."""
        return 0 if self.complete and self.torn_line is None else 3


class _Pass:
    """One pass over a trace's lines: each is checked as it comes, each effective one hashed
    with ``canonical`` and noted for the run's ending, and handed on once replay has used it."""

    def __init__(self, *, canonical: bool, hold: list[TraceLine] | None = None) -> None:
        self.hashed = CanonicalHash() if canonical else None
        self.ending: Ending | None = None
        self.passed: deque[TraceLine] = deque()
        self.hold = hold

    def checked(self, lines: Iterable[TraceLine]) -> Iterator[TraceLine]:
        """Each line, once its record validates and is in the writer's form; a line waits in
        the effective view until its tick commits, so it keeps its validated record only when
        that is used again (by replay, or by the canonical hash)."""
        keep = self.hashed is not None
        for line in lines:
            check_line(line)
            line.release(record=not keep and line.type not in REPLAYED_TYPES)
            if self.hold is not None:
                self.hold.append(line)
            yield line

    def note(self, line: TraceLine) -> None:
        """An effective line: hashed when the canonical hash was asked for, noted for the
        run's ending, and passed on."""
        if self.hashed is not None:
            self.hashed.add(line)
        if self.ending is not None:
            self.ending.note(line)
        self.passed.append(line)

    def counted(self, lines: Iterable[TraceLine]) -> Iterator[TraceLine]:
        """The effective lines, each noted as it passes; once replay has moved on from a line,
        its validated record is let go (a trace read whole, as the viewer holds it, would
        otherwise keep every record as objects)."""
        for line in lines:
            self.note(line)
            yield line
            line.release(record=True)


@dataclass(eq=False)
class Verifying:
    """A trace's effective lines (a resumed run's voided ones left out), each handed on once it
    has been checked and replayed, in one streamed pass; then :attr:`result`, what ``verify``
    found. ``hold`` receives every sound line (void ones too) as it is checked, for a reader
    that keeps the trace whole (the viewer).

    The checks are ``verify``'s own (see :func:`verify_trace`, which is this pass run to its
    end). A line handed on is sound, but the trace is only known to verify once the iteration
    ends without :class:`TraceError`: a reader keeps what it reads and shows nothing before.
    Every command that reads a trace for a result reads it through this pass.
    """

    source: str | Path | Trace
    _: KW_ONLY
    expect_head: str | None = None
    public_key: PublicKey | None = None
    canonical: bool = False
    on_step: Callable[[TickStep], None] | None = None
    hold: list[TraceLine] | None = None
    _result: Verification | None = field(default=None, init=False)

    @property
    def result(self) -> Verification:
        """What ``verify`` found: set once every line has been handed on."""
        if self._result is None:
            raise RuntimeError("the trace has not been read to its end")
        return self._result

    def __iter__(self) -> Iterator[TraceLine]:
        self._result = yield from self._lines()

    def _lines(self) -> Generator[TraceLine, None, Verification]:
        source = self.source
        read = source if isinstance(source, Trace) else TraceStream(source, parsed=True)
        path = read.path
        scan = _Pass(canonical=self.canonical, hold=self.hold)
        lines = scan.checked(read)
        first = next(lines, None)
        if first is None:
            checks = self.expect_head is not None or self.public_key is not None
            return _no_sound_line(read, checks=checks)
        scan.ending = Ending(path, first.run, first.fields)
        card = first.data.card
        if public_card_hash(card) != first.data.card_hash:
            raise first.error("card_hash is not the SHA-256 of the card the record holds")
        _check_settings(first)
        stream = itertools.chain([first], lines)
        recorded: ExtractionData | None = None
        recomputed: ExtractionData | None = None
        if first.data.kind == "direct":
            held = tuple(stream)  # one model call: a few lines
            for line in stream_effective(held):
                scan.note(line)
            direct = replay_direct(Trace(path=path, lines=held, torn_line=None, end_offset=0))
            recorded, recomputed = direct.recorded, direct.recomputed
            yield from _drain(scan.passed)
        else:
            effective = scan.counted(stream_effective(stream))
            leaves: Any = ()
            at: int | None = None
            for item in replay_lines(path, effective, lambda: read.complete):
                if isinstance(item, TickStep):
                    if self.on_step is not None:
                        self.on_step(item)
                elif item[0] == "extraction":
                    recorded, leaves, at = item[1]
                yield from _drain(scan.passed)
            yield from _drain(scan.passed)
            if recorded is not None:
                recomputed = extract_again(card, recorded, leaves, file=path, line=at)
        torn_line, unterminated = read.tail()
        last, terminal, head = read.last, read.terminal, read.head
        assert last is not None  # the first line was read
        scan.ending.check(terminal)
        if terminal is not None:
            _check_signer(first, terminal)
        if self.expect_head is not None and head != self.expect_head:
            raise TraceError(f"head is {head}, expected {self.expect_head}", file=path)
        if self.public_key is not None:
            _check_signature(last, terminal, self.public_key)
        return Verification(
            path=path,
            records=read.records,
            torn_line=torn_line,
            unterminated=unterminated,
            complete=read.complete,
            terminal=terminal.type if terminal else None,
            head=head,
            key_id=str(terminal.data.key_id) if terminal and terminal.data.signature else "",
            signature_checked=self.public_key is not None,
            canonical=scan.hashed.hexdigest() if scan.hashed is not None else None,
            recorded=recorded,
            recomputed=recomputed,
            mass_sum=recomputed.mass_sum if recomputed is not None else None,
            failure=terminal.data.error if terminal and terminal.type == "run_failed" else None,
        )


def _check_settings(started: TraceLine) -> None:
    """A multiverse run's header and its recorded settings name the same extraction rule and
    ticks (the settings' ticks unset: the policy's, which the header holds)."""
    data = started.data
    if data.kind == "direct":
        return
    config = data.config
    if config.get("extraction_rule") != data.extraction_rule:
        raise started.error(
            f"config.extraction_rule {config.get('extraction_rule')!r} is not the run's "
            f"extraction_rule {data.extraction_rule!r}"
        )
    if config.get("ticks") not in (None, data.ticks):
        raise started.error(f"config.ticks {config['ticks']!r} is not the run's ticks {data.ticks}")


def _drain(passed: deque[TraceLine]) -> Iterator[TraceLine]:
    while passed:
        yield passed.popleft()


def verify_trace(
    source: str | Path | Trace,
    *,
    expect_head: str | None = None,
    public_key: PublicKey | None = None,
    canonical: bool = False,
    on_step: Callable[[TickStep], None] | None = None,
) -> Verification:
    """Check a trace in one streamed pass (a path), or one already read (a :class:`Trace`):
    the chain and seals, every record against the schema and the writer's form, a replay of
    every tick and the extraction, and what a finished run ends with (its results, each once,
    and a final record that agrees with them; :mod:`worldsim.trace.ending`); with
    ``expect_head``, also require that head; with ``public_key``, require a valid signature by
    that key on the final terminal record; with ``canonical``, compute the canonical hash;
    ``on_step`` is given each tick as it is rebuilt. Raises TraceError naming the first bad
    line or the failed requirement."""
    reading = Verifying(
        source,
        expect_head=expect_head,
        public_key=public_key,
        canonical=canonical,
        on_step=on_step,
    )
    for _ in reading:
        pass
    return reading.result


def replay(source: str | Path | Trace) -> ReplayResult:
    """Rebuild the whole multiverse from a trace (a path, or one already read) and extract p_yes
    again, in ``verify``'s own pass: a trace ``verify`` refuses raises its TraceError, and one
    cut off replays what it holds (``recorded`` None when it holds no extraction)."""
    trace = source if isinstance(source, Trace) else read_trace(source)
    steps: list[TickStep] = []
    found = verify_trace(trace, on_step=steps.append)
    return ReplayResult(trace, tuple(steps), found.recorded, found.recomputed, found.mass_sum)


def canonical_hash(source: str | Path | Trace) -> str:
    """The canonical hash of a trace (a path, or one already read), as ``verify --canonical``
    gives it (:mod:`worldsim.trace.canonical`): a trace ``verify`` refuses raises its
    TraceError; one cut off in its first record, TraceIncomplete."""
    found = verify_trace(source, canonical=True)
    if found.canonical is None:
        raise TraceIncomplete(f"no canonical hash: {found.why_incomplete}", file=found.path)
    return found.canonical


def verified_lines(path: str | Path, *, expect_head: str | None = None) -> Iterator[TraceLine]:
    """The effective lines of a trace that verifies, for a reader that takes a result from
    them (``score``, ``hindsight``, ``export``): each as ``verify``'s pass hands it on. A trace
    ``verify`` refuses (with ``expect_head``, one whose head is another) raises its TraceError
    (exit 1), where ``verify`` would; a trace that is sound but holds no result (cut off, or a
    failed run) ends the lines with TraceIncomplete (exit 3) saying why."""
    reading = Verifying(path, expect_head=expect_head)
    yield from reading
    result = reading.result
    if not result.complete:
        raise TraceIncomplete(f"no result: {result.why_incomplete}", file=result.path)


def stream_records(path: str | Path, types: Collection[str] | None = None) -> Iterator[RecordView]:
    """The effective records of a trace that verifies (see :func:`verified_lines`), with
    ``types``, of those types only, each made as its line is handed on and held by no one but
    the consumer."""
    for line in verified_lines(path):
        if types is None or line.type in types:
            yield record_view(line)


def trace_records(path: str | Path, types: Collection[str] | None = None) -> list[RecordView]:
    """:func:`stream_records` as a list."""
    return list(stream_records(path, types))


def _no_sound_line(read: Trace | TraceStream, *, checks: bool) -> Verification:
    """A file with no sound line: a torn first line is a trace cut off at once (exit 3, nothing
    to check); an empty file is no trace at all (the reader's TraceError)."""
    path = read.path
    try:
        read.tail()
    except TraceIncomplete as exc:
        if checks:
            raise TraceError(f"{exc.message}: nothing to check", file=path) from None
        return Verification(
            path=path,
            records=0,
            torn_line=exc.line,
            unterminated=False,
            complete=False,
            terminal=None,
            head=None,
            key_id="",
            signature_checked=False,
            canonical=None,
            note=exc.message,
        )
    raise AssertionError("a trace with no sound line has no tail")


def _check_signer(started: TraceLine, terminal: TraceLine) -> None:
    """A run started to be signed ends signed by the key ``run_started.signed_by`` names (a
    resume refuses another key or none): a final record sealed again with another key, or
    without one, was not written by the run."""
    wanted = started.data.signed_by
    data = terminal.data
    if wanted and (data.key_id != wanted or not data.signature):
        signed = f"signed by key {data.key_id}" if data.signature else "not signed"
        raise terminal.error(
            f"{terminal.type} is {signed}, not by the key run_started.signed_by names ({wanted})"
        )


def _check_signature(last: TraceLine, terminal: TraceLine | None, public_key: PublicKey) -> None:
    """The final record must be a terminal record signed by ``public_key`` over its seal."""
    if terminal is None:
        raise TraceError(
            f"no signature to check: the trace ends with {last.type}, not a sealed record",
            file=last.path,
            line=last.number,
        )
    data = terminal.data
    if not data.signature:
        raise TraceError(f"{terminal.type} is not signed", file=terminal.path, line=terminal.number)
    if data.key_id != public_key.key_id:
        raise TraceError(
            f"{terminal.type} is signed by key {data.key_id}, not by the given key "
            f"{public_key.key_id}",
            file=terminal.path,
            line=terminal.number,
        )
    if not public_key.verifies(data.seal, data.signature):
        raise TraceError(
            f"the signature of {terminal.type} does not match its seal (key {data.key_id})",
            file=terminal.path,
            line=terminal.number,
        )
