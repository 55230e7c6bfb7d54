"""A continued run against its parent (``worldsim verify --parent``), and the calendar the
two share."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from worldsim.domain.cards import Card, utc_iso
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import ConfigError, TraceError
from worldsim.sim.particles import parent_particles, parent_values, verified_parent
from worldsim.sim.resume import resume_config
from worldsim.trace.lineage import ParentRef
from worldsim.trace.reader import Trace
from worldsim.world.build import tick_of

__all__ = ["calendar_of", "check_lineage"]


def calendar_of(trace: Trace, config: RunConfig) -> Card:
    """The card whose ``as_of`` is the origin of the calendar of the run in ``trace``
    (``config``, its settings): a continued run's parent's origin, else the run's own as-of
    (its forecast date, if one is set). Its ticks spread from there to the deadline."""
    ref = trace.started.parent
    origin = datetime.fromisoformat(ref.origin) if ref is not None else config.world_card.as_of
    return config.card.model_copy(update={"as_of": origin})


def _check_cut(child: Trace, parent: Trace, ref: ParentRef) -> None:
    """The parent reference's run, origin, since and cut tick are the parent's: its run id,
    its calendar's origin, its date and the tick that holds the continued run's date."""
    config = resume_config(parent, None)
    calendar = calendar_of(parent, config)
    want = {
        "run": parent.run_id,
        "origin": utc_iso(calendar.as_of),
        "since": utc_iso(config.gateway_cutoff),
        "tick": tick_of(calendar, config.effective_ticks, datetime.fromisoformat(ref.as_of)),
    }
    for name, value in want.items():
        if getattr(ref, name) != value:
            raise TraceError(
                f"run_started.parent.{name} is {getattr(ref, name)}; the parent's is {value}",
                file=child.path,
                line=1,
            )


def check_lineage(child: Trace, parent_path: Path) -> ParentRef:
    """``verify --parent``: the parent verifies through the same gate, its head and canonical
    hash are the ones the continued run names, and each particle's digest and mass at the cut
    are the parent's. Raises TraceError naming what differs."""
    ref_data = child.started.parent
    if ref_data is None:
        raise ConfigError("the trace is not a continued run: it names no parent", file=child.path)
    ref = (
        ParentRef.model_validate(ref_data.model_dump())
        if not isinstance(ref_data, ParentRef)
        else ref_data
    )
    parent, result = verified_parent(parent_path)
    if result.head != ref.head:
        raise TraceError(
            f"the parent's head is {result.head}; the continued run names {ref.head}",
            file=parent_path,
        )
    if result.canonical != ref.canonical:
        raise TraceError(
            f"the parent's canonical hash is {result.canonical}; the continued run names "
            f"{ref.canonical}",
            file=parent_path,
        )
    _check_cut(child, parent, ref)
    expected = {p.id: p.data for p in parent_particles(parent, ref.tick)}
    recorded = {line.tl: line.data for line in child.effective if line.type == "particle"}
    if list(expected) != list(recorded):
        raise TraceError(
            f"the continued run's particles ({', '.join(map(str, recorded))}) are not the "
            f"parent's timelines at tick {ref.tick} ({', '.join(expected)})",
            file=child.path,
        )
    for tl, want in expected.items():
        got = recorded[tl]
        if got.digest != want.digest or got.mass != want.mass:
            raise TraceError(
                f"particle {tl}: digest or mass differs from the parent's at tick {ref.tick}",
                file=child.path,
            )
    weights = next((line.data for line in child.effective if line.type == "reweighting"), None)
    if weights is not None:
        values = parent_values(parent, list(expected))
        if values is not None and [r.value for r in weights.rows] != values:
            raise TraceError(
                "the particles' values are not those of their subtrees in the parent",
                file=child.path,
            )
    return ref
