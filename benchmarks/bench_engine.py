"""Engine overhead per agent-step on the offline model, at 10, 100 and 1000 actors (DESIGN §6).

Each card is the demo card with its actors replaced by generated ones (plus the demo's two
cohorts); ``no_branch`` runs it for 8 ticks with ``fsync=False`` into a temporary folder. An
agent-step is one active agent acting in one tick, counted from the trace's ``proposal`` records
(each offline agent proposes exactly once). Two ratios come out: how the cost of an agent-step
grows with the number of agents, and how much the engine adds to the offline agent itself
(the same agents' ``act`` called in a plain loop, with no tasks, review or trace).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import demo_card_data, ratio, run_async
from worldsim.cards import Card
from worldsim.engine import RunConfig, run_card
from worldsim.offline.agents import OfflineActor, OfflineCohort
from worldsim.offline.world import build_world, tick_dates
from worldsim.policy import load_policy
from worldsim.rng import rng_for
from worldsim.roles import TickContext

__all__ = ["make_card", "rows", "run"]

AGENT_COUNTS = (10, 100, 1000)
TICKS = 8


def make_card(actors: int) -> Card:
    """The demo card with ``actors`` generated actors; the cohorts and everything else are kept."""
    data = demo_card_data()
    seeds = data["seeds"]
    seeds["actors"] = [
        {
            "id": f"actor_{i:05d}",
            "name": f"Actor {i}",
            "kind": "institution" if i % 3 else "individual",
            "stance": round(((i * 37) % 201) / 100.0 - 1.0, 2),
            "influence": round(0.2 + 0.6 * ((i * 53) % 101) / 100.0, 2),
            "activity": 0.8,
        }
        for i in range(actors)
    ]
    cohorts = [c["id"] for c in seeds["cohorts"]]
    seeds["relations"] = [
        {"source": f"actor_{i:05d}", "target": cohorts[i % len(cohorts)], "weight": 0.5}
        for i in range(min(actors, 20))
    ]
    data["id"] = f"bench-{actors}-actors"
    return Card.model_validate(data)


def _engine_run(card: Card, workdir: Path) -> tuple[float, int]:
    """One engine run: wall seconds and agent-steps (proposal records in its trace)."""
    config = RunConfig(card=card, policy=load_policy("no_branch"), seed=3, ticks=TICKS)

    async def go() -> tuple[float, Path]:
        start = time.perf_counter_ns()
        result = await run_card(config, workdir, overwrite=True, fsync=False)
        return (time.perf_counter_ns() - start) / 1e9, result.trace

    seconds, trace = run_async(go)
    steps = trace.read_bytes().count(b'"type":"proposal"')
    return seconds, steps


def _bare_agents(card: Card) -> tuple[float, int]:
    """Every actor and cohort's ``act`` for every tick in a plain loop, on the initial state."""
    state, _ = build_world(card, TICKS)
    dates = tick_dates(card, TICKS)
    agents: list[tuple[str, OfflineActor | OfflineCohort]] = [
        (a, OfflineActor()) for a in sorted(state.actors.keys())
    ]
    agents += [(c, OfflineCohort()) for c in state.cohorts.ids]
    contexts = [
        TickContext(
            card=card,
            timeline="t0",
            tick=k,
            ticks=TICKS,
            date=dates[k],
            agent=agent,
            state=state,
            observations=state.events_at(k),
            rng=rng_for(3, "agent", "t0", k, agent),
        )
        for k in range(TICKS)
        for agent, _ in agents
    ]
    roles = [role for _ in range(TICKS) for _, role in agents]

    async def go() -> float:
        start = time.perf_counter_ns()
        for ctx, role in zip(contexts, roles, strict=True):
            await role.act(ctx)
        return (time.perf_counter_ns() - start) / 1e9

    return run_async(go), len(contexts)


def measure(actors: int, *, quick: bool) -> dict[str, Any]:
    card = make_card(actors)
    repeats = {10: 7, 100: 5, 1000: 3}.get(actors, 3)
    if quick:
        repeats = 3 if actors < 1000 else 1
    samples: list[float] = []
    steps = 0
    with tempfile.TemporaryDirectory(prefix="worldsim-bench-") as tmp:
        for _ in range(repeats):
            seconds, steps = _engine_run(card, Path(tmp))
            samples.append(seconds)
    bare = [_bare_agents(card) for _ in range(repeats)]
    wall = statistics.median(samples)
    bare_per_step = statistics.median(s / n for s, n in bare)
    return {
        "actors": actors,
        "agents": actors + len(card.seeds.cohorts if card.seeds else ()),
        "repeats": repeats,
        "agent_steps": steps,
        "wall_s": wall,
        "wall_samples_s": samples,
        "steps_per_s": steps / wall,
        "per_step_s": wall / steps,
        "bare_act_per_step_s": bare_per_step,
    }


def run(quick: bool = False) -> dict[str, Any]:
    points = [measure(n, quick=quick) for n in AGENT_COUNTS]
    base = points[0]
    for p in points:
        p["per_step_vs_smallest"] = ratio(p["per_step_s"], base["per_step_s"])
        p["engine_over_bare_act"] = ratio(p["per_step_s"], p["bare_act_per_step_s"])
    return {
        "what": "no_branch, 8 ticks, offline model: agent-steps per second and per-step cost",
        "ticks": TICKS,
        "points": points,
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "actors": p["actors"],
            "agent-steps": p["agent_steps"],
            "agent-steps/s": round(p["steps_per_s"]),
            "per-step cost ÷ @10 actors": p["per_step_vs_smallest"],
            "engine ÷ bare act (per step)": p["engine_over_bare_act"],
        }
        for p in result["points"]
    ]
