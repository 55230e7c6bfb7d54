"""Scale curve: the offline engine on the demo card with 10², 10³, 10⁴ generated actors.

Each point runs in a fresh process, as a user's ``worldsim run`` would: the demo card with its
evidence, cohorts, events and hypotheses, its actors replaced by generated ones
(:func:`benchmarks._common.generated_actors_card`, activity 0.8), 8 ticks, the offline model,
``fsync=False``. Reported per point: agent-steps (proposals), agent-steps per second
of the run itself (start-up, imports and card loading excluded), the run's CPU seconds (steadier
than its wall time on a shared machine), the process's peak RSS, and the
trace's size; then the growth exponent of run time against actors, fitted on log-log between
points, and branching against no_branch at 10³ actors.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["rows", "run"]

TICKS = 8
FULL = ((100, "no_branch"), (1000, "no_branch"), (10_000, "no_branch"), (1000, "branching"))
QUICK = ((100, "no_branch"), (300, "no_branch"), (1000, "no_branch"), (300, "branching"))


def _point(actors: int, policy: str) -> dict[str, Any]:
    """Run in the child process: one run of the card, timed from the call of ``run_card``."""
    import anyio

    from benchmarks._common import agent_steps, generated_actors_card, peak_rss_mb
    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card

    card = generated_actors_card(actors)
    config = RunConfig(card=card, policy=load_policy(policy), seed=3, ticks=TICKS)
    with tempfile.TemporaryDirectory(prefix="worldsim-scale-") as tmp:
        start, cpu = time.perf_counter(), time.process_time()
        result = anyio.run(lambda: run_card(config, Path(tmp), overwrite=True, fsync=False))
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
        peak = peak_rss_mb()  # the run's, before its trace is read back to be counted
        data = result.trace.read_bytes()
    return {
        "actors": actors,
        "policy": policy,
        "run_s": seconds,
        "run_cpu_s": cpu_seconds,
        "agent_steps": agent_steps(data),
        "timelines": data.count(b'"type":"timeline_started"'),
        "trace_mb": len(data) / 1e6,
        "peak_rss_mb": peak,
    }


def _in_child(actors: int, policy: str) -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_scale", str(actors), policy],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    point: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    point["process_s"] = time.perf_counter() - start
    point["steps_per_s"] = point["agent_steps"] / point["run_s"]
    return point


def _exponent(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Slope of log(run time) against log(actors) between two points."""
    return math.log(b["run_s"] / a["run_s"]) / math.log(b["actors"] / a["actors"])


def run(quick: bool = False) -> dict[str, Any]:
    points = [_in_child(n, policy) for n, policy in (QUICK if quick else FULL)]
    flat = [p for p in points if p["policy"] == "no_branch"]
    for a, b in itertools.pairwise(flat):
        b["exponent_from_previous"] = _exponent(a, b)
    branching = next(p for p in points if p["policy"] == "branching")
    same = next(p for p in flat if p["actors"] == branching["actors"])
    branching["vs_no_branch"] = branching["run_s"] / same["run_s"]
    return {
        "what": "offline engine, demo card with generated actors, 8 ticks, one process per point",
        "ticks": TICKS,
        "points": points,
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "actors": p["actors"],
            "policy": p["policy"],
            "timelines": p["timelines"],
            "agent-steps": p["agent_steps"],
            "run s": p["run_s"],
            "run CPU s": p["run_cpu_s"],
            "agent-steps/s": round(p["steps_per_s"]),
            "growth exponent": p.get("exponent_from_previous"),
            "÷ no_branch": p.get("vs_no_branch"),
            "peak RSS MB": round(p["peak_rss_mb"]),
            "trace MB": p["trace_mb"],
        }
        for p in result["points"]
    ]


if __name__ == "__main__":
    from worldsim.domain.collector import collector_paced

    with collector_paced():  # as the worldsim command runs
        print(json.dumps(_point(int(sys.argv[1]), sys.argv[2])))
