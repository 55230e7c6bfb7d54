"""Engine overhead per agent-step on the offline model, at 10, 100 and 1000 actors (DESIGN §6).

Each card is the demo card with its actors replaced by generated ones (plus the demo's two
cohorts); ``no_branch`` runs it for 8 ticks with ``fsync=False`` into a temporary folder. An
agent-step is one active agent acting in one tick, counted from the trace's ``proposal`` records
(each offline agent proposes exactly once). Two ratios come out: how the cost of an agent-step
grows with the number of agents, and how much the engine adds to the offline agent itself
(the same agents' offline rules called in a plain loop, with no tasks, review or trace).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import agent_steps, generated_actors_card, run_async
from worldsim.domain.cards import Card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.domain.rng import AgentSeeds, rng_for
from worldsim.offline.agents import OfflineCohort, offline_moves
from worldsim.sim.session import run_card
from worldsim.world.build import build_world, tick_dates
from worldsim.world.views import TickBatch, TickContext

__all__ = ["rows", "run"]

AGENT_COUNTS = (10, 100, 1000)
TICKS = 8


def _engine_run(card: Card, workdir: Path) -> tuple[float, int]:
    """One engine run: wall seconds and agent-steps (proposals in its trace)."""
    config = RunConfig(card=card, policy=load_policy("no_branch"), seed=3, ticks=TICKS)

    async def go() -> tuple[float, Path]:
        start = time.perf_counter_ns()
        result = await run_card(config, workdir, overwrite=True, fsync=False)
        return (time.perf_counter_ns() - start) / 1e9, result.trace

    seconds, trace = run_async(go)
    steps = agent_steps(trace.read_bytes())
    return seconds, steps


def _bare_agents(card: Card) -> tuple[float, int]:
    """The offline rules alone for every tick on the initial state, with no tasks, review or
    trace: all actors as one batch (as the engine hands them to the offline actor role), each
    cohort's ``act``."""
    state, _ = build_world(card, TICKS)
    dates = tick_dates(card, TICKS)
    actors = tuple(sorted(state.actors.keys()))
    cohorts = state.cohorts.ids
    batches = [
        TickBatch(
            card=card,
            timeline="t0",
            tick=k,
            ticks=TICKS,
            date=dates[k],
            agents=actors,
            state=state,
            observations=state.events_at(k),
            rngs=AgentSeeds(3, "agent", "t0", k, actors),
        )
        for k in range(TICKS)
    ]
    contexts = [
        TickContext(
            card=card,
            timeline="t0",
            tick=k,
            ticks=TICKS,
            date=dates[k],
            agent=cohort,
            state=state,
            observations=state.events_at(k),
            rng=rng_for(3, "agent", "t0", k, cohort),
        )
        for k in range(TICKS)
        for cohort in cohorts
    ]

    async def go() -> float:
        start = time.perf_counter_ns()
        for batch in batches:
            await offline_moves(batch)
        for ctx in contexts:
            await OfflineCohort().act(ctx)
        return (time.perf_counter_ns() - start) / 1e9

    return run_async(go), len(actors) * TICKS + len(contexts)


#: Engine runs per round at each size; a round's sample is their median (small runs are short).
RUNS_PER_ROUND = {10: 5, 100: 3, 1000: 1}


def run(quick: bool = False) -> dict[str, Any]:
    """Round-robin over the sizes, so a noisy neighbour slows every size alike; ratios are the
    median of the per-round ratios."""
    rounds = 2 if quick else 5
    cards = {n: generated_actors_card(n) for n in AGENT_COUNTS}
    per_step: dict[int, list[float]] = {n: [] for n in AGENT_COUNTS}
    bare: dict[int, list[float]] = {n: [] for n in AGENT_COUNTS}
    walls: dict[int, list[float]] = {n: [] for n in AGENT_COUNTS}
    steps: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="worldsim-bench-") as tmp:
        for _ in range(rounds):
            for n, card in cards.items():
                runs = [_engine_run(card, Path(tmp)) for _ in range(RUNS_PER_ROUND.get(n, 1))]
                wall = statistics.median(seconds for seconds, _ in runs)
                steps[n] = runs[0][1]
                walls[n].append(wall)
                per_step[n].append(wall / steps[n])
                seconds, count = _bare_agents(card)
                bare[n].append(seconds / count)

    smallest = AGENT_COUNTS[0]
    points: list[dict[str, Any]] = []
    for n, card in cards.items():
        wall = statistics.median(walls[n])
        points.append(
            {
                "actors": n,
                "agents": n + len(card.seeds.cohorts if card.seeds else ()),
                "agent_steps": steps[n],
                "wall_s": wall,
                "wall_samples_s": walls[n],
                "steps_per_s": steps[n] / wall,
                "per_step_s": statistics.median(per_step[n]),
                "bare_act_per_step_s": statistics.median(bare[n]),
                "per_step_vs_smallest": statistics.median(
                    a / b for a, b in zip(per_step[n], per_step[smallest], strict=True)
                ),
                "engine_over_bare_act": statistics.median(
                    a / b for a, b in zip(per_step[n], bare[n], strict=True)
                ),
            }
        )
    return {
        "what": "no_branch, 8 ticks, offline model: agent-steps per second and per-step cost",
        "ticks": TICKS,
        "rounds": rounds,
        "runs_per_round": RUNS_PER_ROUND,
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
