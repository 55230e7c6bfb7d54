"""Replay: rebuild every timeline's state tick by tick from the trace alone, with no model call,
check each committed digest and the invariants, and re-extract p_yes (DESIGN §4.8)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from worldsim.domain.cards import parse_utc, utc_iso
from worldsim.domain.errors import StateError, TraceError
from worldsim.domain.outputs import ChoiceForecastOutput, ForecastOutput
from worldsim.models.schema import extract_json
from worldsim.trace.audit import MASS_TOLERANCE
from worldsim.trace.particles import ParticleCheck
from worldsim.trace.reader import Trace, TraceLine
from worldsim.trace.records import TICK_TYPES, ExtractionData
from worldsim.world.build import spread_dates
from worldsim.world.extraction import Leaf, extract
from worldsim.world.outcome import DIRECT_RULE, direct_extraction, direct_options
from worldsim.world.state import (
    WorldState,
    apply_deltas,
    apply_review,
    deliver_events,
    state_digest,
)
from worldsim.world.timeline import settlement_of

__all__ = [
    "REPLAYED_TYPES",
    "ReplayResult",
    "TickStep",
    "extract_again",
    "replay_direct",
    "replay_lines",
    "replay_steps",
]


@dataclass(frozen=True, slots=True)
class TickStep:
    """One committed tick of one timeline, as rebuilt from the trace."""

    timeline: str
    tick: int
    date: str | None
    digest: str
    mass: float
    status: str
    state: WorldState
    proposals: tuple[Any, ...]
    review: Any
    forks: tuple[Any, ...]
    rejected: tuple[Any, ...]
    ledger_changes: tuple[tuple[str, str, str], ...]
    observations: tuple[Any, ...]

    @property
    def variables_set(self) -> tuple[tuple[str, Any], ...]:
        """The world variables this tick's events set as it started (a variable intervention)."""
        return tuple((k, v) for ev in self.state.events_at(self.tick) for k, v in ev.variables)

    def as_json(self) -> dict[str, Any]:
        extra = {"variables_set": dict(self.variables_set)} if self.variables_set else {}
        return {
            **extra,
            "timeline": self.timeline,
            "tick": self.tick,
            "date": self.date,
            "digest": self.digest,
            "mass": self.mass,
            "status": self.status,
            "observations": [o.id for o in self.observations],
            "proposals": [
                {
                    "agent": p.agent,
                    "index": p.index,
                    "role": p.role,
                    "endpoint": p.endpoint,
                    "direction": p.direction,
                    "magnitude": p.magnitude,
                    "summary": p.summary,
                }
                for p in self.proposals
            ],
            "accepted": [f"{r.agent}#{r.index}" for r in self.review.accepted]
            if self.review
            else [],
            "rejected": [
                {"proposal": f"{r.agent}#{r.index}", "reason": r.reason}
                for r in self.review.rejected
            ]
            if self.review
            else [],
            "ledger_changes": [
                {"endpoint": e, "from": a, "to": b} for e, a, b in self.ledger_changes
            ],
            "forks": [
                {
                    "child": f.child,
                    "hypothesis": f.candidate.hypothesis,
                    "probability": f.candidate.probability,
                    "mass_child": f.mass_child,
                }
                for f in self.forks
            ],
            "fork_rejections": [
                {"hypothesis": r.candidate.hypothesis, "reason": r.reason, "came_true": r.came_true}
                for r in self.rejected
            ],
            "pressure": {k: self.state.pressure[k] for k in sorted(self.state.pressure.keys())},
        }


@dataclass(slots=True)
class _Cursor:
    state: WorldState
    mass: float
    date: str | None = None
    observations: tuple[Any, ...] = ()
    proposals: list[Any] = field(default_factory=list)
    review: Any = None
    forks: list[Any] = field(default_factory=list)
    rejected: list[Any] = field(default_factory=list)
    before: WorldState | None = None
    status: str | None = None
    """The status its last ``tick_committed`` in this trace recorded (a continued run's
    particle may end, pruned or settled before, with none)."""


def _check_committed(line: TraceLine, data: Any, state: WorldState) -> None:
    """A committed tick's ledger, pressure and p_yes_now are the rebuilt state's
    (`WorldState.tick_summary`, as the engine writes them when it commits)."""
    for name, value in state.tick_summary().items():
        if getattr(data, name) != value:
            raise line.error(f"committed {name} differs from the rebuilt state's")


@dataclass(frozen=True, slots=True)
class ReplayResult:
    trace: Trace
    steps: tuple[TickStep, ...]
    recorded: ExtractionData | None
    recomputed: ExtractionData | None
    mass_sum: float | None

    @property
    def matches(self) -> bool:
        return self.recorded is not None and self.recorded == self.recomputed


def _calendar(started: TraceLine) -> list[str]:
    """Each tick's date, as the engine gives it: the run's ticks spread evenly from its
    origin (a continued run's parent's, else its forecast date or its card's as-of) to the
    card's deadline, as :func:`~worldsim.world.build.tick_dates` spreads them. Empty for a
    run of no ticks (a direct forecast)."""
    data = started.data
    try:
        parent = getattr(data, "parent", None)
        start = parent.origin if parent is not None else data.forecast_date or data.card["as_of"]
        origin, deadline = parse_utc(start), parse_utc(data.card["deadline"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise started.error(f"the run's calendar cannot be read: {exc}") from None
    return [utc_iso(date) for date in spread_dates(origin, deadline, data.ticks)]


def replay_steps(trace: Trace) -> Iterator[TickStep | tuple[str, Any]]:
    """Yield each rebuilt tick in trace order, then ``("extraction", (recorded, leaves,
    line))``, ``line`` the number of the recorded extraction's line.

    Raises :class:`TraceError` naming the line at the first inconsistency.
    """
    return replay_lines(trace.path, trace.effective, lambda: trace.complete)


_ON_A_TIMELINE = TICK_TYPES | {"timeline_ended"}
"""Records replay applies to a started timeline's cursor."""

_CONTINUATION = frozenset({"particle", "news", "likelihood", "reweighting"})
"""A continued run's records (:mod:`worldsim.trace.lineage`): its particles and their news."""

REPLAYED_TYPES = (
    _ON_A_TIMELINE
    | _CONTINUATION
    | {
        "run_started",
        "world_initialized",
        "timeline_started",
        "extraction",
    }
)
"""The record types whose data replay reads (of the others it reads only the envelope)."""


def replay_lines(
    path: Path,
    lines: Iterable[TraceLine],
    complete: Callable[[], bool],
    on_start: Callable[[str, WorldState, float], None] | None = None,
) -> Iterator[TickStep | tuple[str, Any]]:
    """:func:`replay_steps` over a trace's effective lines as they stream past (``path`` names
    the trace; ``complete()``, asked once the lines are exhausted, says whether it ended with
    ``run_completed``). Holds only each timeline's open tick and the leaves. ``on_start`` is
    told each timeline's state and mass as it starts (a continued run's particles: once their
    mass is re-weighted)."""
    world: WorldState | None = None
    particles = ParticleCheck(on_start, _Cursor)
    cursors: dict[str, _Cursor] = {}
    pending_children: dict[str, tuple[WorldState, float]] = {}
    ended: dict[str, Leaf] = {}
    recorded: ExtractionData | None = None
    recorded_at: int | None = None

    calendar: list[str] = []
    for line in lines:
        t = line.type
        if t == "run_started":
            particles.start(line)
            calendar = _calendar(line)
        if t in _CONTINUATION:
            particles.note(line, cursors)
            world = world or particles.world
            continue
        if t == "world_initialized":
            if world is None:
                try:
                    world = WorldState.from_json(line.data.state)
                except StateError as exc:
                    raise line.error(f"initial state cannot be read: {exc.message}") from None
                except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                    reason = f"{type(exc).__name__}: {exc}"
                    raise line.error(f"initial state cannot be read: {reason}") from None
                if state_digest(world) != line.data.digest:
                    raise line.error("initial state does not match its digest")
            continue
        if world is None:
            if line.tl is not None:
                raise line.error(f"record for timeline {line.tl} before the world was built")
            continue  # the run's start, and an initializer's calls
        if t not in REPLAYED_TYPES:
            continue  # retrievals, model calls, reports: nothing to rebuild from
        rec = line.record
        tl, tick = rec.tl, rec.tick
        try:
            if t == "timeline_started":
                if rec.data.parent is None:
                    cursor = _Cursor(world, 1.0)
                else:
                    if tl not in pending_children:
                        raise line.error(f"timeline {tl} starts without a fork record")
                    state, mass = pending_children.pop(tl)
                    cursor = _Cursor(state, mass)
                if rec.data.mass != cursor.mass:
                    raise line.error("timeline mass differs from its fork")
                if state_digest(cursor.state) != rec.data.digest:
                    raise line.error("timeline's starting state does not match its digest")
                cursors[tl] = cursor
                if on_start is not None:
                    on_start(tl, cursor.state, cursor.mass)
            elif t in _ON_A_TIMELINE:
                found = cursors.get(tl) if tl is not None else None
                if found is None:
                    raise line.error(f"record for unknown timeline {tl}")
                cursor = found
                if t == "tick_started":
                    if tick is None or not 0 <= tick < len(calendar):
                        raise line.error(f"tick {tick} is outside the run's {len(calendar)} ticks")
                    if rec.data.date != calendar[tick]:
                        raise line.error(
                            f"tick {tick} is dated {rec.data.date}, not {calendar[tick]}: "
                            "the run's calendar"
                        )
                    cursor.date = rec.data.date
                    cursor.observations = tuple(rec.data.observations)
                    cursor.before = cursor.state
                    if tick is not None:
                        cursor.state = deliver_events(cursor.state, tick)
                elif t == "proposals":
                    cursor.proposals.extend(rec.data.proposals)
                elif t == "review":
                    cursor.review = rec.data
                    try:
                        cursor.state = apply_review(
                            cursor.state, rec.data.deltas, rec.data.ledger, tick
                        )
                    except StateError:
                        # the engine terminated this timeline on the same error; the
                        # committed digest below checks that nothing was applied
                        cursor.state = cursor.state
                elif t == "fork":
                    d = rec.data
                    if d.mass_before != cursor.mass:
                        raise line.error("fork's mass_before differs from the timeline's")
                    p = d.candidate.probability
                    if d.mass_child != cursor.mass * p or d.mass_parent != cursor.mass * (1.0 - p):
                        raise line.error("fork masses are not m·p and m·(1−p)")
                    pending_children[d.child] = (
                        apply_deltas(cursor.state, d.child_deltas),
                        d.mass_child,
                    )
                    cursor.state = apply_deltas(cursor.state, d.parent_deltas)
                    cursor.mass = d.mass_parent
                    cursor.forks.append(d)
                elif t == "fork_rejected":
                    cursor.state = apply_deltas(cursor.state, rec.data.deltas)
                    cursor.rejected.append(rec.data)
                elif t == "tick_committed":
                    digest = state_digest(cursor.state)
                    if digest != rec.data.digest:
                        raise line.error("rebuilt state does not match the committed digest")
                    if rec.data.mass != cursor.mass:
                        raise line.error("committed mass differs from the rebuilt mass")
                    if cursor.status not in (None, "running"):
                        raise line.error(f"a tick committed after the timeline was {cursor.status}")
                    _check_committed(line, rec.data, cursor.state)
                    cursor.status = rec.data.status
                    before = cursor.before or cursor.state
                    changes = tuple(
                        (key, before.ledger[key].status, row.status)
                        for key, row in sorted(cursor.state.ledger.items())
                        if key in before.ledger and before.ledger[key].status != row.status
                    )
                    yield TickStep(
                        timeline=tl,
                        tick=tick,
                        date=cursor.date,
                        digest=digest,
                        mass=cursor.mass,
                        status=rec.data.status,
                        state=cursor.state,
                        proposals=tuple(cursor.proposals),
                        review=cursor.review,
                        forks=tuple(cursor.forks),
                        rejected=tuple(cursor.rejected),
                        ledger_changes=changes,
                        observations=cursor.observations,
                    )
                    cursor.proposals, cursor.forks, cursor.rejected = [], [], []
                    cursor.review = None
                else:  # timeline_ended
                    d = rec.data
                    if d.mass != cursor.mass:
                        raise line.error("final mass differs from the rebuilt mass")
                    committed = "running" if d.status == "deadline" else d.status
                    if cursor.status is not None and cursor.status != committed:
                        raise line.error(
                            f"ended {d.status}, but its last tick committed it {cursor.status}"
                        )
                    outcome = settlement_of(cursor.state, d.status, d.forced_p_yes, d.forced_probs)
                    if d.settlement != outcome and (
                        d.settlement != "unresolved" or d.status == "settled"
                    ):
                        raise line.error(f"settlement '{d.settlement}' contradicts the ledger")
                    if d.status == "settled" and outcome == "unresolved":
                        raise line.error("settled timeline with open scored endpoints")
                    ended[tl] = Leaf(tl, d.mass, d.settlement, d.forced_p_yes, d.forced_probs)
            elif t == "extraction":
                recorded, recorded_at = rec.data, line.number
        except TraceError:
            raise
        except StateError as exc:
            raise line.error(f"cannot apply: {exc.message}") from None
    if world is None:
        if complete():
            raise TraceError("trace has no world_initialized record", file=path)
        # cut off (or failed) before the world was built: nothing to rebuild
        yield ("extraction", (None, (), None))
        yield ("cursors", ({}, {}))
        return
    if pending_children and complete():
        raise TraceError(
            f"forked timelines never started: {', '.join(sorted(pending_children))}", file=path
        )
    yield ("extraction", (recorded, tuple(ended.values()), recorded_at))
    yield ("cursors", (cursors, pending_children))


def extract_again(
    card: dict[str, Any],
    recorded: ExtractionData,
    leaves: Sequence[Leaf],
    *,
    file: Path,
    line: int | None,
) -> ExtractionData:
    """Apply the recorded rule to the rebuilt leaves of the trace at ``file`` (of ``card``,
    its extraction on ``line``); it must give the recorded extraction exactly, over a mass that
    sums to 1. Raises TraceError otherwise."""
    options = (
        None
        if card.get("kind", "binary") == "binary"
        else [ep["id"] for ep in card["endpoints"] if ep.get("kind", "scored") == "scored"]
    )
    recomputed = extract(list(leaves), recorded.rule, options)
    if abs(recomputed.mass_sum - 1.0) > MASS_TOLERANCE:
        raise TraceError(f"path mass sums to {recomputed.mass_sum!r}, not 1", file=file)
    if recomputed != recorded:
        raise TraceError(
            f"recomputed extraction (p_yes {recomputed.p_yes!r}, p_options "
            f"{recomputed.p_options!r}) differs from the recorded one (p_yes {recorded.p_yes!r}, "
            f"p_options {recorded.p_options!r})",
            file=file,
            line=line,
        )
    return recomputed


def replay_direct(trace: Trace) -> ReplayResult:
    """Check a direct trace (one model call, no world): the recorded extraction must be the
    ``direct/1`` extraction of the p_yes (or the option distribution) in the ``llm_call``
    reply, exactly, with mass sum 1.

    A trace without an extraction (a failed run) has nothing to compare and passes with
    ``recorded`` None. Raises TraceError naming the line at the first inconsistency.
    """
    line = trace.first("extraction")
    if line is None:
        return ReplayResult(trace, (), None, None, None)
    recorded: ExtractionData = line.data
    if recorded.rule != DIRECT_RULE:
        raise line.error(f"direct trace with extraction rule '{recorded.rule}'")
    calls = [c for c in trace.of_type("llm_call") if c.data.error is None]
    if len(calls) != 1:
        raise line.error(f"direct trace with {len(calls)} successful model calls, not 1")
    call = calls[0]
    reply = call.data.reply
    if reply is None:
        raise call.error("the model call recorded no reply")
    card = trace.started.card
    binary = card.get("kind", "binary") == "binary"
    output_type = ForecastOutput if binary else ChoiceForecastOutput
    try:
        output = output_type.model_validate_json(extract_json(reply))
    except ValidationError as exc:
        raise call.error(
            f"the recorded reply is not a valid {output_type.__name__}: {exc.errors()[0]['msg']}",
        ) from None
    if isinstance(output, ForecastOutput):
        recomputed = direct_extraction(output.p_yes)
    else:
        scored = [ep["id"] for ep in card["endpoints"] if ep.get("kind", "scored") == "scored"]
        try:
            options = direct_options(scored, [(p.endpoint, p.p) for p in output.probabilities])
        except ValueError as exc:
            raise call.error(f"the recorded reply does not fit the card: {exc}") from None
        recomputed = direct_extraction(None, options)
    if abs(recorded.mass_sum - 1.0) > MASS_TOLERANCE:
        raise line.error(f"path mass sums to {recorded.mass_sum!r}, not 1")
    if recomputed != recorded:
        raise line.error(
            f"recorded extraction (p_yes {recorded.p_yes!r}, p_options {recorded.p_options!r}) "
            f"differs from the reply's (p_yes {recomputed.p_yes!r}, p_options "
            f"{recomputed.p_options!r})",
        )
    done = trace.first("run_completed")
    if done is not None and done.data.p_yes != recomputed.p_yes:
        raise done.error(f"run_completed p_yes {done.data.p_yes!r} differs from the reply's")
    return ReplayResult(trace, (), recorded, recomputed, recomputed.mass_sum)
