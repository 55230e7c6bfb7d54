"""The effective history of a trace: what counts once resumes are taken into account.

A run that was cut off (a crash, a kill, its budget) and resumed has a ``run_resumed`` marker.
Before it, each timeline's records after its last committed boundary (``timeline_started``,
``tick_committed`` or ``timeline_ended``) belong to a tick that never committed: they are void,
and the resumed run writes that tick again. Run-level results written before the marker
(extraction, report, audit, the reporter's calls) are void too, as is everything after
``run_started`` when the world was never initialized. Replay and the canonical hash read only
the effective lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from worldsim.trace.reader import TraceLine

__all__ = ["BOUNDARIES", "effective_lines", "void_lines"]

BOUNDARIES = frozenset({"timeline_started", "tick_committed", "timeline_ended"})
_RUN_RESULTS = frozenset({"extraction", "report", "audit"})
_KEPT_ALWAYS = frozenset({"run_started", "run_failed", "run_resumed"})


def void_lines(segment: Sequence[TraceLine], *, first: bool = True) -> set[int]:
    """Line numbers of ``segment`` (a stretch ending where a run was cut off) that are void.

    ``first`` says whether the segment opens the trace: only there can the world be missing,
    which voids everything but the run's start; a later segment continues an initialized run.
    """
    has_world = any(line.type == "world_initialized" for line in segment)
    if first and not has_world:
        return {line.number for line in segment if line.type not in _KEPT_ALWAYS}
    last_boundary: dict[str, int] = {}
    for i, line in enumerate(segment):
        tl = line.tl
        if tl is not None and line.type in BOUNDARIES:
            last_boundary[tl] = i
    world_at = next((i for i, line in enumerate(segment) if line.type == "world_initialized"), -1)
    void: set[int] = set()
    for i, line in enumerate(segment):
        if line.type in _KEPT_ALWAYS:
            continue
        tl = line.tl
        if tl is None:
            if line.type in _RUN_RESULTS or (line.type == "llm_call" and i > world_at):
                void.add(line.number)
        elif i > last_boundary.get(tl, -1):
            void.add(line.number)
    return void


def effective_lines(lines: Sequence[TraceLine]) -> list[TraceLine]:
    """The lines that make up the run's history, with every void stretch removed."""
    void: set[int] = set()
    start = 0
    for i, line in enumerate(lines):
        if line.type == "run_resumed":
            void |= void_lines(lines[start:i], first=start == 0)
            start = i + 1
    return [line for line in lines if line.number not in void]
