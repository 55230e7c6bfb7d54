"""The effective history of a trace: what counts once resumes are taken into account.

A run that was cut off (a crash, a kill, its budget) and resumed has a ``run_resumed`` marker.
Before it, each timeline's records after its last committed boundary (``timeline_started``,
``tick_committed`` or ``timeline_ended``) belong to a tick that never committed: they are void,
and the resumed run writes that tick again. Run-level results written before the marker
(forecast graph, extraction, report, audit, the reporter's calls) are void too, as is
everything after ``run_started`` when the world was never initialized. A continued run's world
is its re-weighted particles: its ``particle``, ``news`` and ``likelihood`` records count once
its ``reweighting`` record is written, and are void with everything else when it is not.
Replay, the canonical hash, ``score`` and ``hindsight`` read only the effective lines.

The rule is applied as the lines stream past: a line is passed on as soon as it is known to
count (a timeline's record once that timeline commits a boundary after it; a run-level result
at the end of the trace), and dropped when a ``run_resumed`` marker voids it. Lines come out in
file order; what is held back is at most the open tick of each timeline and the run's results.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, Protocol, TypeVar

__all__ = ["BOUNDARIES", "EnvelopeLine", "effective_lines", "stream_effective", "void_lines"]

BOUNDARIES = frozenset({"timeline_started", "tick_committed", "timeline_ended"})
_RUN_RESULTS = frozenset({"forecast_graph", "extraction", "report", "audit"})
_KEPT_ALWAYS = frozenset({"run_started", "run_failed", "run_resumed"})
_WORLD = frozenset({"world_initialized", "reweighting"})
"""What makes a run's world: its initial state, or a continued run's re-weighted particles."""
_BEFORE_WORLD = frozenset({"particle", "news", "likelihood"})
"""A continued run's records that its re-weighting completes (each particle's on its timeline)."""


class EnvelopeLine(Protocol):
    """What the rule reads of a trace line: its envelope's type and timeline, and its number."""

    @property
    def number(self) -> int: ...

    @property
    def type(self) -> str: ...

    @property
    def tl(self) -> str | None: ...


L = TypeVar("L", bound=EnvelopeLine)


class _Entry(Generic[L]):
    """A line and whether it counts: True, False, or None while that is not yet known."""

    __slots__ = ("counts", "line")

    def __init__(self, line: L) -> None:
        self.line = line
        self.counts: bool | None = None


class _Segment(Generic[L]):
    """The lines between two cut-off points of a run, judged as they arrive.

    A line counts when its rule is met (see the module docstring) or when the segment turns out
    to be the run's last; a line whose rule is still unmet when a ``run_resumed`` marker closes
    the segment is void.
    """

    def __init__(self, *, first: bool) -> None:
        self.first = first  # only the trace's first segment can lack a world
        self.world = False  # a world_initialized (or reweighting) record seen in this segment
        self.by_timeline: dict[str, list[_Entry[L]]] = {}  # no boundary of theirs after them yet
        self.by_world: list[_Entry[L]] = []  # count once this segment initializes the world
        self.open: list[_Entry[L]] = []  # count only if the segment is the run's last

    def add(self, entry: _Entry[L]) -> None:
        line = entry.line
        kind, tl = line.type, line.tl
        if kind in _KEPT_ALWAYS:
            entry.counts = True
            return
        if kind in _WORLD and not self.world:
            self.world = True
            for waiting in self.by_world:
                waiting.counts = True
            self.by_world.clear()
        if kind in _BEFORE_WORLD and not self.world:
            self.by_world.append(entry)
        elif tl is not None:
            if kind in BOUNDARIES:
                settled = self.by_timeline.pop(tl, [])
                settled.append(entry)
                if self.first and not self.world:
                    self.by_world.extend(settled)
                else:
                    for waiting in settled:
                        waiting.counts = True
            else:
                self.by_timeline.setdefault(tl, []).append(entry)
        elif kind in _RUN_RESULTS or (kind == "llm_call" and self.world):
            self.open.append(entry)
        elif kind == "llm_call" or (self.first and not self.world):
            self.by_world.append(entry)  # an initializer's call, or anything before the world
        else:
            entry.counts = True

    def close(self, *, resumed: bool) -> None:
        """End the segment: at a ``run_resumed`` marker (``resumed``) or at the end of the trace."""
        counts = not resumed
        for entries in (*self.by_timeline.values(), self.by_world, self.open):
            for entry in entries:
                entry.counts = counts


def stream_effective(lines: Iterable[L]) -> Iterator[L]:
    """The lines that make up the run's history, in file order, as soon as each is known to."""
    pending: deque[_Entry[L]] = deque()
    segment: _Segment[L] = _Segment(first=True)
    for line in lines:
        entry = _Entry(line)
        if line.type == "run_resumed":
            segment.close(resumed=True)
            segment = _Segment(first=False)
        segment.add(entry)
        pending.append(entry)
        while pending and pending[0].counts is not None:
            done = pending.popleft()
            if done.counts:
                yield done.line
    segment.close(resumed=False)
    for entry in pending:
        if entry.counts:
            yield entry.line


def effective_lines(lines: Iterable[L]) -> list[L]:
    """The lines that make up the run's history, with every void stretch removed."""
    return list(stream_effective(lines))


def void_lines(segment: Sequence[EnvelopeLine], *, first: bool = True) -> set[int]:
    """Line numbers of ``segment`` (a stretch ending where a run was cut off) that are void.

    ``first`` says whether the segment opens the trace: only there can the world be missing,
    which voids everything but the run's start; a later segment continues an initialized run.
    """
    judged: _Segment[EnvelopeLine] = _Segment(first=first)
    entries = [_Entry(line) for line in segment]
    for entry in entries:
        judged.add(entry)
    judged.close(resumed=True)
    return {entry.line.number for entry in entries if not entry.counts}
