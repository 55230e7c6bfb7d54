"""Cohort members as arrays: member-updates per second, alone and in a whole run.

Two measurements (docs/performance.md, "Cohort members"):

* **update**: what a tick pays for one cohort of n members: one ``update_members`` delta applied
  with ``apply_deltas`` (the members' picks and four array updates, the cohort row set to their
  exact means) and the committed state's digest (which hashes the new arrays). Median of
  repeats, in process.
* **run**: the demo card as a user runs it (evidence, actors, events; ``no_branch``, 8 ticks,
  offline, ``fsync=False``) with its ``public`` cohort given n members, in a fresh process per
  point, against the same card without members: the run's extra seconds per member-update
  applied (updates counted from the trace's reviews) and peak RSS.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["rows", "run"]

TICKS = 8
FULL = (10_000, 100_000, 1_000_000)
QUICK = (10_000, 1_000_000)


def _card(members: int) -> Any:
    from benchmarks._common import demo_card_data
    from worldsim.domain.cards import Card

    data = demo_card_data()
    for cohort in data["seeds"]["cohorts"]:
        if cohort["id"] == "public":
            cohort["members"] = members
    return Card.model_validate(data)


def _update(n: int, repeats: int) -> dict[str, Any]:
    from worldsim.world.build import build_world
    from worldsim.world.state import MemberAction, UpdateMembers, apply_deltas, state_digest

    state, _ = build_world(_card(n), TICKS)
    actions = (
        MemberAction(direction=0.8, magnitude=0.6, probability=0.5),
        MemberAction(direction=-0.2, magnitude=0.3, probability=0.35),
        MemberAction(direction=-0.9, magnitude=0.9, probability=0.15),
    )
    samples = []
    for draw in range(repeats):
        decision = UpdateMembers(id="public", actions=actions, attention=0.6, trust=0.4, draw=draw)
        start = time.perf_counter()
        state = apply_deltas(state, [decision])
        state_digest(state)
        samples.append(time.perf_counter() - start)
    seconds = statistics.median(samples)
    return {"members": n, "seconds": seconds, "updates_per_s": n / seconds, "samples": samples}


def _point(members: int) -> dict[str, Any]:
    """Run in the child process: one run of the card, timed from the call of ``run_card``."""
    import anyio

    from benchmarks._common import peak_rss_mb
    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card

    config = RunConfig(card=_card(members), policy=load_policy("no_branch"), seed=3, ticks=TICKS)
    with tempfile.TemporaryDirectory(prefix="worldsim-members-") as tmp:
        start = time.perf_counter()
        result = anyio.run(lambda: run_card(config, Path(tmp), overwrite=True, fsync=False))
        seconds = time.perf_counter() - start
        updates = 0
        with result.trace.open(encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                if record["type"] == "review":
                    ops = [d["op"] for d in record["data"]["deltas"]]
                    updates += ops.count("update_members") * members
    return {
        "members": members,
        "run_s": seconds,
        "member_updates": updates,
        "peak_rss_mb": peak_rss_mb(),
    }


def _in_child(members: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_members", str(members)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    point: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return point


def run(quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    updates = [_update(n, 5 if n >= 10**6 else 20) for n in sizes]
    baseline = _in_child(0)
    runs = [_in_child(n) for n in sizes]
    for point in runs:
        extra = point["run_s"] - baseline["run_s"]
        point["extra_s"] = extra
        point["updates_per_extra_s"] = point["member_updates"] / extra if extra > 0 else None
        point["vs_no_members"] = point["run_s"] / baseline["run_s"]
    return {
        "what": "update_members + state digest in process; demo card runs with members, "
        "one process per point",
        "ticks": TICKS,
        "updates": updates,
        "baseline": baseline,
        "runs": runs,
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    table = [
        {
            "measure": "update + digest",
            "members": u["members"],
            "member-updates/s": f"{u['updates_per_s']:.3g}",
            "run ÷ no members": None,
            "peak RSS MB": None,
        }
        for u in result["updates"]
    ]
    table += [
        {
            "measure": "whole run (8 ticks)",
            "members": p["members"],
            "member-updates/s": (
                f"{p['updates_per_extra_s']:.3g}" if p["updates_per_extra_s"] else None
            ),
            "run ÷ no members": p["vs_no_members"],
            "peak RSS MB": round(p["peak_rss_mb"]),
        }
        for p in result["runs"]
    ]
    return table


if __name__ == "__main__":
    from worldsim.domain.collector import collector_paced

    with collector_paced():  # as the worldsim command runs
        print(json.dumps(_point(int(sys.argv[1]))))
