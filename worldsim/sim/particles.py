"""A continued run's particles: its parent's timelines as they stood at the end of the tick
before the cut, rebuilt from the parent trace alone (``worldsim.sim.lineage`` checks a
continued run against them).

Tick *j* is the tick holding the continued run's date. Every timeline that exists at the end
of tick *j*−1 is a particle: its state then (its last committed tick, or its fork state for a
child forked at *j*−1), its mass then and, if it had already ended, how. Timelines born at
tick *j* or later are dropped; their ids are not used again (a particle's ``children`` counts
every fork it made in the parent).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsim.domain.contracts import lineage
from worldsim.domain.errors import ConfigError
from worldsim.trace.lineage import ParticleData
from worldsim.trace.reader import Trace, read_trace
from worldsim.trace.replay import TickStep, replay_lines
from worldsim.trace.verify import Verification, verify_trace
from worldsim.world.extraction import EXTRACTION_VALUES, Leaf
from worldsim.world.particles import subtree_values
from worldsim.world.state import WorldState, state_digest
from worldsim.world.timeline import Timeline, settlement_of

__all__ = [
    "Particle",
    "parent_particles",
    "parent_values",
    "reweighted_timeline",
    "verified_parent",
]


@dataclass(frozen=True, slots=True)
class Particle:
    """One particle: its id, its record (lineage, prior mass, state, how it ended if it did)
    and its rebuilt state."""

    id: str
    data: ParticleData
    state: WorldState

    @property
    def running(self) -> bool:
        return self.data.status == "running"


def reweighted_timeline(
    p: Particle, mass: float, *, pruned: bool, cut: int, as_of: str, prune_below: float
) -> Timeline:
    """The timeline particle ``p`` is once re-weighted to ``mass``: as the parent left it,
    ended if it had ended there, and terminated at the cut tick when the news pruned it while
    it was running (a pruned one that had ended keeps its ending, the reason added)."""
    d = p.data
    tl = Timeline(p.id, d.parent, d.fork_tick, d.depth, mass, d.slots, p.state)
    tl.children = d.children
    tl.forced_p_yes, tl.forced_probs, tl.reason = d.forced_p_yes, d.forced_probs, d.reason
    if d.status != "running":
        tl.status = d.status
        tl.end_tick = d.end_tick if d.end_tick is not None else -1
        tl.settlement = d.settlement or settlement_of(
            p.state, d.status, d.forced_p_yes, d.forced_probs
        )
    if pruned:
        reason = f"pruned by the news up to {as_of}: its mass fell below {prune_below}"
        tl.reason = f"{tl.reason}; {reason}" if not p.running and tl.reason else reason
        if p.running:
            tl.status, tl.end_tick = "terminated", cut
            tl.settlement = tl.state.outcome() or "unresolved"
            tl.forced_p_yes = tl.forced_probs = None
    return tl


def verified_parent(path: Path) -> tuple[Trace, Verification]:
    """The parent trace, verified through the one gate (canonical hash included) and complete:
    a continued run starts only from a finished run."""
    result = verify_trace(path, canonical=True)
    if not result.complete:
        raise ConfigError(f"the parent run holds no result: {result.why_incomplete}", file=path)
    trace = read_trace(path)
    if trace.started.kind != "multiverse":
        raise ConfigError("only a multiverse run can be continued", file=path)
    return trace, result


def parent_particles(trace: Trace, cut: int) -> list[Particle]:
    """The particles of ``trace`` at the end of tick ``cut`` − 1, in lineage order."""
    starts: dict[str, tuple[WorldState, float]] = {}

    def started(tl: str, state: WorldState, mass: float) -> None:
        starts[tl] = (state, mass)

    last: dict[str, TickStep] = {}
    for item in replay_lines(trace.path, trace.effective, lambda: trace.complete, started):
        if isinstance(item, TickStep) and item.tick < cut:
            last[item.timeline] = item
    meta: dict[str, dict[str, Any]] = {}
    given: dict[str, int] = {}
    forks: dict[str, int] = {}
    ended: dict[str, Any] = {}
    commits: dict[str, Any] = {}
    for line in trace.effective:
        tl, kind = line.tl or "", line.type
        if kind in ("timeline_started", "particle"):  # a particle carries its parent's count
            d = line.data
            meta[tl] = {
                "parent": d.parent,
                "fork_tick": d.fork_tick,
                "depth": d.depth,
                "slots": d.slots,
                "children": getattr(d, "children", 0),
                "born": d.fork_tick if kind == "timeline_started" else None,
            }
        elif kind == "fork":
            forks[tl] = forks.get(tl, 0) + 1
            if line.record.tick < cut:
                given[tl] = given.get(tl, 0) + line.data.slots_child
        elif kind == "timeline_ended":
            ended[tl] = line.data
        elif kind == "tick_committed" and line.record.tick < cut:
            commits[tl] = line.data
    particles = []
    for tl in sorted(meta, key=lineage):
        m = meta[tl]
        if m["born"] is not None and m["born"] >= cut:
            continue  # born at the cut tick or later: dropped
        step = last.get(tl)
        state, mass = (step.state, step.mass) if step is not None else starts[tl]
        end: Any = ended.get(tl)
        done = end is not None and end.end_tick < cut
        # how it stood: its ending when it had ended, else its last committed tick's values
        src = end if done else commits.get(tl)
        data = ParticleData(
            parent=m["parent"],
            fork_tick=m["fork_tick"],
            depth=m["depth"],
            mass=mass,
            slots=m["slots"] - given.get(tl, 0),
            children=m["children"] + forks.get(tl, 0),
            status=end.status if done else "running",
            settlement=end.settlement if done else None,
            forced_p_yes=getattr(src, "forced_p_yes", None),
            forced_probs=getattr(src, "forced_probs", None),
            end_tick=end.end_tick if done else None,
            reason=getattr(src, "reason", ""),
            digest=state_digest(state),
            state=state.to_json(),
        )
        particles.append(Particle(tl, data, state))
    return particles


def parent_values(trace: Trace, particles: list[str]) -> list[float] | None:
    """Each particle's outcome value in the parent trace (`subtree_values`, under the parent's
    extraction rule); ``None`` for a multiple-choice card."""
    started = trace.started
    if started.card.get("kind", "binary") != "binary":
        return None
    value = EXTRACTION_VALUES[started.extraction_rule]
    leaves = {
        str(line.tl): (
            line.data.mass,
            value(Leaf(str(line.tl), line.data.mass, line.data.settlement, line.data.forced_p_yes)),
        )
        for line in trace.effective
        if line.type == "timeline_ended"
    }
    values = subtree_values(leaves, particles)
    return [values[p] for p in particles]
