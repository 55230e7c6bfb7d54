"""``verify``: the hash chain, the seal, every record's schema and form, every invariant replay
can check, and on request the trace's head (its anchor), the signature of its final record and
the canonical hash.

The trace is checked as it streams past, in one pass: what is held at any time is each
timeline's open tick and the leaves (and, for the canonical hash, the content it covers), never
the whole file.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldsim.domain.collector import collector_paced
from worldsim.domain.errors import TraceError, TraceIncomplete
from worldsim.trace.canonical import CanonicalHash
from worldsim.trace.effective import stream_effective
from worldsim.trace.reader import Trace, TraceLine, TraceStream, check_line
from worldsim.trace.records import ExtractionData
from worldsim.trace.replay import (
    REPLAYED_TYPES,
    TickStep,
    extract_again,
    replay_direct,
    replay_lines,
)

if TYPE_CHECKING:
    from worldsim.trace.signing import PublicKey

__all__ = ["Verification", "verify_trace"]


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
    """One pass over a trace's lines: each is checked as it comes, and each effective one
    hashed with ``canonical``."""

    def __init__(self, *, canonical: bool) -> None:
        self.hashed = CanonicalHash() if canonical else None

    def checked(self, lines: Iterable[TraceLine]) -> Iterator[TraceLine]:
        """Each line, once its record validates and is in the writer's form; a line waits in
        the effective view until its tick commits, so it keeps its validated record only when
        that is used again (by replay, or by the canonical hash)."""
        keep = self.hashed is not None
        for line in lines:
            check_line(line)
            line.release(record=not keep and line.type not in REPLAYED_TYPES)
            yield line

    def note(self, line: TraceLine) -> None:
        """An effective line, hashed when the canonical hash was asked for."""
        if self.hashed is not None:
            self.hashed.add(line)

    def counted(self, lines: Iterable[TraceLine]) -> Iterator[TraceLine]:
        """The effective lines, each noted as it passes; once replay has moved on from a line,
        its validated record is let go (a trace read whole, as the viewer holds it, would
        otherwise keep every record as objects)."""
        for line in lines:
            self.note(line)
            yield line
            line.release(record=True)


@collector_paced()
def verify_trace(
    source: str | Path | Trace,
    *,
    expect_head: str | None = None,
    public_key: PublicKey | None = None,
    canonical: bool = False,
    on_step: Callable[[TickStep], None] | None = None,
) -> Verification:
    """Check a trace in one streamed pass (a path), or one already read (a :class:`Trace`):
    the chain and seals, every record against the schema and the writer's form, and a replay
    of every tick and the extraction; with ``expect_head``, also require that head; with
    ``public_key``, require a valid signature by that key on the final terminal record; with
    ``canonical``, compute the canonical hash; ``on_step`` is given each tick as it is rebuilt.
    Raises TraceError naming the first bad line or the failed requirement.

    The pass runs at the collector's slower pace (:mod:`worldsim.domain.collector`), as a
    stream is read: a trace already read whole is checked as fast as one read as it comes."""
    read = source if isinstance(source, Trace) else TraceStream(source, parsed=True)
    path = read.path
    scan = _Pass(canonical=canonical)
    lines = scan.checked(read)
    first = next(lines, None)
    if first is None:
        return _no_sound_line(read, checks=expect_head is not None or public_key is not None)
    card = first.data.card
    stream = itertools.chain([first], lines)
    if first.data.kind == "direct":
        held = tuple(stream)  # one model call: a few lines
        for line in stream_effective(held):
            scan.note(line)
        direct = replay_direct(Trace(path=path, lines=held, torn_line=None, end_offset=0))
        recorded, recomputed = direct.recorded, direct.recomputed
    else:
        effective = scan.counted(stream_effective(stream))
        recorded, recomputed = _replayed(read, card, effective, on_step)
    torn_line, unterminated = read.tail()
    last, terminal, head = read.last, read.terminal, read.head
    assert last is not None  # the first line was read
    if expect_head is not None and head != expect_head:
        raise TraceError(f"head is {head}, expected {expect_head}", file=path)
    if public_key is not None:
        _check_signature(last, terminal, public_key)
    return Verification(
        path=path,
        records=read.records,
        torn_line=torn_line,
        unterminated=unterminated,
        complete=read.complete,
        terminal=terminal.type if terminal else None,
        head=head,
        key_id=str(terminal.data.key_id) if terminal and terminal.data.signature else "",
        signature_checked=public_key is not None,
        canonical=scan.hashed.hexdigest() if scan.hashed is not None else None,
        recorded=recorded,
        recomputed=recomputed,
        mass_sum=recomputed.mass_sum if recomputed is not None else None,
    )


def _replayed(
    read: Trace | TraceStream,
    card: dict[str, Any],
    effective: Iterator[TraceLine],
    on_step: Callable[[TickStep], None] | None,
) -> tuple[ExtractionData | None, ExtractionData | None]:
    """Replay the effective lines as they come, giving each tick to ``on_step``; then the
    recorded extraction, and the same computed again from the leaves (``None`` both when the
    run did not get that far)."""
    recorded: ExtractionData | None = None
    leaves: Any = ()
    at: int | None = None
    for item in replay_lines(read.path, effective, lambda: read.complete):
        if isinstance(item, TickStep):
            if on_step is not None:
                on_step(item)
        elif item[0] == "extraction":
            recorded, leaves, at = item[1]
    if recorded is None:
        return None, None
    again = extract_again(card, recorded, leaves, file=read.path, line=at)
    return recorded, again


def _no_sound_line(read: Trace | TraceStream, *, checks: bool) -> Verification:
    """A file with no sound line: a torn first line is a trace cut off at once (exit 3, nothing
    to check); an empty file is no trace at all."""
    path = read.path
    try:
        read.tail()
    except TraceIncomplete as exc:
        if exc.line is None:  # an empty file: not even a run id, no evidence of a trace
            raise TraceError(exc.message, file=path) from None
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
