"""Resume a run that was cut off: a crash, a kill, or its budget (DESIGN §6).

The trace says everything: the run's settings are in ``run_started``; each timeline's state at
its last committed tick is rebuilt by replay. Ticks that never committed are void (see
:mod:`worldsim.trace.effective`) and run again; completed ticks are never run again, and every
completed model call is answered from the trace's own records (`RecordedReplies`) or the
response cache, so the resumed trace has the same canonical hash as an uninterrupted run with
the same replies. A continued run's particles start at its cut tick with their re-weighted
mass (see :mod:`worldsim.sim.continuation`). This module only reads the trace;
:func:`worldsim.sim.resuming.resume_run` opens the models and hands the engine its
:class:`RestorePoint`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.errors import ConfigError, WorldsimError
from worldsim.sim.particles import Particle, reweighted_timeline
from worldsim.sim.scheduler import RestorePoint
from worldsim.trace.effective import void_lines
from worldsim.trace.forecast import FORECAST_TYPES, record_views
from worldsim.trace.reader import Trace, iter_trace
from worldsim.trace.replay import replay_steps
from worldsim.world.build import WorldSource
from worldsim.world.state import WorldState
from worldsim.world.timeline import Timeline, settlement_of

__all__ = [
    "Cut",
    "has_world",
    "holds_world",
    "recorded_spend",
    "restore_point",
    "resume_config",
]

_MODEL_SETTINGS_FROM_TRACE = ("model", "role_models")


def resume_config(trace: Trace, models: ModelConfig | None = None) -> RunConfig:
    """The run's configuration as its trace recorded it; ``models`` may change cache, budget
    or limits (routes always come from the trace)."""
    started = trace.started
    if started.kind != "multiverse":
        raise ConfigError("only multiverse runs can be resumed", file=trace.path)
    try:
        recorded = RunConfig.from_dict(started.config)
    except ConfigError as exc:
        raise ConfigError(exc.message, file=trace.path, field=f"config.{exc.field}") from None
    if models is None:
        return recorded
    routes = recorded.models.model_dump(include=set(_MODEL_SETTINGS_FROM_TRACE))
    return recorded.model_copy(update={"models": models.model_copy(update=routes)})


def recorded_spend(trace: Trace) -> float:
    """What the run has paid so far: the cost of every ``llm_call`` in the trace that was not a
    cache hit, voided ticks included (their calls were paid; on resume the cache answers them).
    A resumed run's budget starts from here."""
    return math.fsum(line.data.paid_usd for line in trace.of_type("llm_call"))


def has_world(trace: Trace) -> bool:
    """Whether a trace got as far as the world a resume starts again from: its
    ``world_initialized``, or a continued run's ``reweighting``."""
    world = "reweighting" if trace.started.parent is not None else "world_initialized"
    return trace.first(world) is not None


_WORLDS = frozenset({"world_initialized", "reweighting"})


def holds_world(path: Path) -> bool:
    """Whether the trace file at ``path`` got as far as :func:`has_world` asks (a continued
    run's, its re-weighting), read only that far; a file that cannot be read holds none."""
    try:
        return any(line.type in _WORLDS for line in iter_trace(path))
    except (OSError, WorldsimError):
        return False


_NO_PATH = "NewsLeavesNoPath"
"""The failure of a continued run whose news prunes every particle: the same news would again."""


class Cut:
    """Where a resumable trace was cut off: the effective lines kept and how many were voided.

    A complete trace, or one cut before its world was built (a continued run: before its
    particles were re-weighted), is a ConfigError.
    """

    def __init__(self, trace: Trace) -> None:
        if trace.complete:
            raise ConfigError("the run is complete; there is nothing to resume", file=trace.path)
        failed = trace.terminal
        if failed is not None and failed.type == "run_failed" and failed.data.kind == _NO_PATH:
            prune_below = trace.started.policy.get("prune_below")
            raise ConfigError(
                "the continued run cannot be resumed: its news left no timeline, every "
                f"particle falling below the policy's prune_below {prune_below} (the "
                "parent's policy); continue a run whose policy sets a lower one",
                file=trace.path,
            )
        if not has_world(trace):
            raise ConfigError(
                "the run stopped before its world was initialized; start it again instead"
                if trace.started.parent is None
                else "the continued run stopped before its news was weighed: continue its "
                "parent again (run --continue PARENT --as-of DATE --force)",
                file=trace.path,
            )
        last_marker = max(
            (i for i, line in enumerate(trace.lines) if line.type == "run_resumed"), default=-1
        )
        void = void_lines(trace.lines[last_marker + 1 :], first=last_marker < 0)
        self.trace = trace
        self.voided = len(void)
        self.kept = [line for line in trace.effective if line.number not in void]
        self.cause = trace.terminal.data.kind if trace.terminal is not None else "an interruption"


def restore_point(cut: Cut, config: RunConfig) -> RestorePoint:
    """Rebuild from the kept lines the timelines that ended, the ones still to run, the forks,
    proposals and retrievals the report and the audit need, and what the forecast graph is made
    from (when the run builds one)."""
    ticks = config.effective_ticks
    trace, kept = cut.trace, cut.kept
    point = RestorePoint(ended={}, starts=[])
    rejected = 0
    source: WorldSource = "seeds"
    view = Trace(path=trace.path, lines=tuple(kept), torn_line=None, end_offset=0)
    cursors: dict[str, Any] = {}
    pending: dict[str, tuple[Any, float]] = {}
    for item in replay_steps(view):
        if isinstance(item, tuple) and item[0] == "cursors":
            cursors, pending = item[1]
    started: dict[str, Any] = {}
    last_commit: dict[str, Any] = {}
    ended: dict[str, Any] = {}
    forks: dict[str, list[Any]] = {}
    for line in kept:
        tl, t = line.record.tl, line.type
        if t in ("timeline_started", "particle"):  # a continued run's particle starts at its cut
            started[tl] = line
        elif t == "tick_committed":
            last_commit[tl] = line
        elif t == "timeline_ended":
            ended[tl] = line
        elif t == "fork":
            forks.setdefault(tl, []).append(line)
            d = line.data
            point.forks.append(
                {
                    "parent": d.parent,
                    "child": d.child,
                    "tick": line.record.tick,
                    "hypothesis": d.candidate.hypothesis,
                    "probability": d.candidate.probability,
                }
            )
        elif t == "fork_rejected":
            rejected += 1
        elif t == "proposals":
            point.proposals_seen.update(
                (tl, line.record.tick, p.agent) for p in line.data.proposals
            )
        elif t == "world_initialized":
            point.init_problems[:] = list(line.data.problems)
            source = line.data.source

    point.retrievals.extend(view.accesses())
    starts = point.starts
    parent = trace.started.parent
    if parent is None and "t0" not in started:
        init = next(line for line in kept if line.type == "world_initialized")
        world = WorldState.from_json(init.data.state)
        starts.append(
            (Timeline("t0", None, None, 0, 1.0, config.policy.max_active, world), 0, True)
        )
    weights = next((line.data for line in kept if line.type == "reweighting"), None)
    rows = {row.timeline: row for row in weights.rows} if weights is not None else {}
    for tl_id, line in started.items():
        d = line.data
        cursor = cursors[tl_id]
        made = forks.get(tl_id, [])
        particle = line.type == "particle"
        if particle:  # as the continuation made it (`worldsim.sim.continuation`)
            assert parent is not None and weights is not None  # a Cut has both
            tl = reweighted_timeline(
                Particle(tl_id, d, cursor.state),
                cursor.mass,
                pruned=rows[tl_id].pruned,
                cut=parent.tick,
                as_of=parent.as_of,
                prune_below=weights.prune_below,
            )
            if tl.status != "running" and tl_id not in ended:
                point.unrecorded_ends.append(tl)
                continue
            first = parent.tick
        else:
            tl = Timeline(tl_id, d.parent, d.fork_tick, d.depth, cursor.mass, d.slots, cursor.state)
            first = (d.fork_tick + 1) if d.fork_tick is not None else 0
        tl.slots -= sum(f.data.slots_child for f in made)
        tl.children += len(made)
        if tl_id in ended:
            e = ended[tl_id].data
            tl.status, tl.settlement, tl.end_tick, tl.reason = (
                e.status,
                e.settlement,
                e.end_tick,
                e.reason,
            )
            tl.forced_p_yes, tl.forced_probs = e.forced_p_yes, e.forced_probs
            point.ended[tl_id] = tl
            continue
        commit = last_commit.get(tl_id)
        if commit is None:
            starts.append((tl, first, False))
            continue
        c = commit.data
        tl.reason, tl.forced_p_yes, tl.forced_probs = c.reason, c.forced_p_yes, c.forced_probs
        k = commit.record.tick
        if c.status in {"settled", "terminated"}:
            tl.status = c.status
            tl.end_tick = k
            tl.settlement = settlement_of(tl.state, c.status, c.forced_p_yes, c.forced_probs)
            starts.append((tl, ticks, False))
        else:
            starts.append((tl, k + 1, False))
    for child_id, (state, mass) in sorted(pending.items()):
        fork = next(f for fs in forks.values() for f in fs if f.data.child == child_id)
        d = fork.data
        child = Timeline(child_id, d.parent, fork.record.tick, d.depth, mass, d.slots_child, state)
        starts.append((child, fork.record.tick + 1, True))
    forecast = record_views(kept, FORECAST_TYPES) if config.graph else []
    return replace(point, forks_rejected=rejected, world_source=source, forecast=forecast)
