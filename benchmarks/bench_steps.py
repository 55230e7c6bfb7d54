"""Instructions per agent-step: what one offline agent-step costs, counted rather than timed.

On a shared machine a run's time drifts by up to 2× within minutes, so two versions of the engine
cannot be told apart by a few percent. The count of instructions a run executes does not drift:
each point runs ``bench_scale`` (the demo card with n generated actors, 8 ticks, ``no_branch``)
under valgrind's callgrind with ``PYTHONHASHSEED=0``, and the cost of one agent-step is the
difference between two sizes over the difference in agent-steps, so that start-up (imports,
card loading) cancels out. Needs ``valgrind`` (``apt-get install valgrind``); without it the
benchmark says so and reports nothing. A point takes about 50× its native time (the full sizes,
run side by side, take about 8 minutes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["rows", "run"]

FULL = (100, 400)
QUICK = (30, 90)
_COLLECTED = re.compile(r"Collected : (\d+)")


def _counted(actors: int) -> dict[str, Any]:
    """One size under callgrind: the instructions of the whole process and its agent-steps."""
    with tempfile.TemporaryDirectory(prefix="worldsim-steps-") as tmp:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={Path(tmp) / 'callgrind.out'}",
                sys.executable,
                "-m",
                "benchmarks.bench_scale",
                str(actors),
                "no_branch",
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind reported no count: {done.stderr[-500:]}")
    point = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "actors": actors,
        "instructions": int(found.group(1)),
        "agent_steps": point["agent_steps"],
    }


def run(quick: bool = False) -> dict[str, Any]:
    if shutil.which("valgrind") is None:
        return {"skipped": "valgrind is not installed (apt-get install valgrind)", "points": []}
    with ThreadPoolExecutor(max_workers=2) as pool:
        small, large = pool.map(_counted, QUICK if quick else FULL)
    per_step = (large["instructions"] - small["instructions"]) / (
        large["agent_steps"] - small["agent_steps"]
    )
    return {
        "what": "instructions per offline agent-step (callgrind), start-up cancelled out",
        "points": [small, large],
        "instructions_per_step": per_step,
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    if "skipped" in result:
        return [{"measured": "instructions per agent-step", "result": result["skipped"]}]
    return [
        {
            "actors": p["actors"],
            "agent-steps": p["agent_steps"],
            "instructions (whole process)": p["instructions"],
            "instructions per agent-step": round(result["instructions_per_step"]),
        }
        for p in result["points"]
    ]


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv[1:])))
