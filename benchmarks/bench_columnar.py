"""Columnar tick: the offline engine against its numpy floor at 10⁴ and 10⁵ actors, 10⁵ actors
through the CLI, branching against no_branch at 10⁴, and card loading.

* **engine ÷ floor**: wall time per agent-step of ``run_card`` (the demo card with n generated
  actors, ``no_branch``, 8 ticks, offline, ``fsync=False``; card loading excluded, world
  building included) over that of :func:`benchmarks.floor.floor_run` (the same rules as numpy
  over arrays, the same per-agent generators, no trace, no review), measured in one fresh
  process per size: floor, engine, floor (the floor's mean). The floor's agent-steps and its
  first tick's directions are checked against the engine's trace.
* **CLI**: ``worldsim run CARD.json --policy no_branch --ticks 8`` at 10⁴ and 10⁵ actors, start-up
  and card loading included: wall time, agent-steps/s, peak RSS of the process, the growth
  exponent of wall time from 10⁴ to 10⁵, and ``worldsim verify`` of the 10⁵ trace (its time and
  verdict).
* **branching ÷ no_branch** at 10⁴ actors: ``run_card`` wall times, one fresh process each.
* **card loading**: ``load_card`` of the same card as YAML and as JSON at 10⁴ and 10⁵ actors.
"""

from __future__ import annotations

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
SEED = 3
FULL = (10_000, 100_000)
QUICK = (1_000, 10_000)
ROOT = Path(__file__).resolve().parent.parent


def _versus_floor(actors: int) -> dict[str, Any]:
    """In the child: floor, engine, floor on the same card."""
    import anyio

    from benchmarks._common import agent_steps, generated_actors_card
    from benchmarks.floor import evidence_pushes, floor_run
    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card
    from worldsim.trace.reader import iter_trace

    card = generated_actors_card(actors)
    pushes = evidence_pushes(card)
    before = floor_run(card, pushes, ticks=TICKS, seed=SEED)
    config = RunConfig(card=card, policy=load_policy("no_branch"), seed=SEED, ticks=TICKS)
    with tempfile.TemporaryDirectory(prefix="worldsim-columnar-") as tmp:
        start, cpu = time.perf_counter(), time.process_time()
        result = anyio.run(lambda: run_card(config, Path(tmp), overwrite=True, fsync=False))
        engine_s, engine_cpu_s = time.perf_counter() - start, time.process_time() - cpu
        data = result.trace.read_bytes()
        first = next(
            line.fields
            for line in iter_trace(result.trace)
            if line.type == "proposals" and line.tick == 0
        )
    after = floor_run(card, pushes, ticks=TICKS, seed=SEED)
    steps = agent_steps(data)
    directions = [p["direction"] for p in first["proposals"] if p["role"] == "actor"]
    if before.agent_steps != steps or before.first_directions != directions:
        raise AssertionError("the floor does not make the engine's moves")
    floor_s = (before.seconds + after.seconds) / 2
    floor_cpu_s = (before.cpu_seconds + after.cpu_seconds) / 2
    return {
        "actors": actors,
        "agent_steps": steps,
        "engine_s": engine_s,
        "engine_cpu_s": engine_cpu_s,
        "floor_s": floor_s,
        "floor_cpu_s": floor_cpu_s,
        "floor_samples_s": [before.seconds, after.seconds],
        "engine_us_per_step": engine_s / steps * 1e6,
        "floor_us_per_step": floor_s / steps * 1e6,
        "engine_over_floor": engine_s / floor_s,
        "engine_over_floor_cpu": engine_cpu_s / floor_cpu_s,
    }


def _run_policy(actors: int, policy: str) -> dict[str, Any]:
    from benchmarks.bench_scale import _point

    return _point(actors, policy)


def _load_cards(paths: list[str]) -> dict[str, float]:
    from worldsim.domain.cards import load_card

    times: dict[str, float] = {}
    for path in paths:
        start = time.perf_counter()
        load_card(path)
        times[Path(path).name] = time.perf_counter() - start
    return times


def _child(what: str, *args: Any) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_columnar", what, json.dumps(args)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


_SPAWN = """
import json, os, subprocess, sys, time
start = time.perf_counter()
quiet = subprocess.DEVNULL
proc = subprocess.Popen(json.loads(sys.argv[1]), stdout=quiet, stderr=quiet)
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps([time.perf_counter() - start, usage.ru_utime + usage.ru_stime,
                  usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)]))
"""


def _timed(argv: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds, peak RSS (MB) and exit status of a command, started from a
    small process of its own: a child's ``ru_maxrss`` starts from its parent's size at the
    fork, and this runner holds the cards it wrote."""
    done = subprocess.run(
        [sys.executable, "-c", _SPAWN, json.dumps(argv)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    seconds, cpu, peak, code = json.loads(done.stdout.strip().splitlines()[-1])
    return seconds, cpu, peak, code


def _write_cards(sizes: tuple[int, ...], folder: Path) -> dict[int, dict[str, Path]]:
    import yaml

    from benchmarks._common import generated_actors_card

    paths: dict[int, dict[str, Path]] = {}
    for n in sizes:
        data = generated_actors_card(n).model_dump(mode="json", exclude_none=True)
        paths[n] = {"json": folder / f"card{n}.json", "yaml": folder / f"card{n}.yaml"}
        paths[n]["json"].write_text(json.dumps(data), encoding="utf-8")
        paths[n]["yaml"].write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return paths


def run(quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    small, large = sizes
    versus = [_child("versus", n) for n in sizes]
    no_branch = _child("policy", small, "no_branch")
    branching = _child("policy", small, "branching")
    worldsim = str(Path(sys.executable).with_name("worldsim"))
    cli: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="worldsim-columnar-cli-") as tmp:
        folder = Path(tmp)
        cards = _write_cards(sizes, folder)
        loading = _child("load", [str(cards[n][kind]) for n in sizes for kind in ("yaml", "json")])
        for n in sizes:
            out = folder / f"out{n}"
            argv = [worldsim, "run", str(cards[n]["json"]), "--policy", "no_branch"]
            argv += ["--ticks", str(TICKS), "--seed", str(SEED), "--out", str(out), "--json"]
            seconds, cpu, peak, code = _timed(argv)
            (trace,) = out.glob("*.jsonl")
            data = trace.read_bytes()
            steps = data.count(b'"unretrieved_citations":')
            verify_s, _, verify_peak, verified = _timed([worldsim, "verify", str(trace)])
            cli.append(
                {
                    "actors": n,
                    "wall_s": seconds,
                    "cpu_s": cpu,
                    "exit": code,
                    "agent_steps": steps,
                    "steps_per_s": steps / seconds,
                    "peak_rss_mb": peak,
                    "trace_mb": len(data) / 1e6,
                    "verify_s": verify_s,
                    "verify_peak_rss_mb": verify_peak,
                    "verifies": verified == 0,
                }
            )
    cli[1]["exponent"] = math.log(cli[1]["wall_s"] / cli[0]["wall_s"]) / math.log(large / small)
    cli[1]["exponent_cpu"] = math.log(cli[1]["cpu_s"] / cli[0]["cpu_s"]) / math.log(large / small)
    return {
        "what": "demo card with n generated actors, 8 ticks, offline, seed 3",
        "versus_floor": versus,
        "cli": cli,
        "branching": {
            "actors": small,
            "no_branch_s": no_branch["run_s"],
            "branching_s": branching["run_s"],
            "ratio": branching["run_s"] / no_branch["run_s"],
            "timelines": branching["timelines"],
        },
        "card_loading_s": loading,
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in result["versus_floor"]:
        out.append(
            {
                "measure": f"engine ÷ floor per agent-step, {p['actors']:,} actors (wall)",
                "value": p["engine_over_floor"],
                "detail": f"engine {p['engine_us_per_step']:.1f} µs, floor "
                f"{p['floor_us_per_step']:.1f} µs a step ({p['agent_steps']:,} steps)",
                "target": "≤ 5",
            }
        )
        out.append(
            {
                "measure": f"engine ÷ floor per agent-step, {p['actors']:,} actors (CPU)",
                "value": p["engine_over_floor_cpu"],
                "detail": f"engine {p['engine_cpu_s']:.2f} s, floor {p['floor_cpu_s']:.2f} s CPU",
                "target": "≤ 5",
            }
        )
    for c in result["cli"]:
        out.append(
            {
                "measure": f"CLI, {c['actors']:,} actors × 8 ticks, no_branch",
                "value": c["wall_s"],
                "detail": f"{c['steps_per_s']:,.0f} agent-steps/s, {c['cpu_s']:.1f} s CPU, peak "
                f"{c['peak_rss_mb']:,.0f} MB"
                f", trace {c['trace_mb']:,.0f} MB, verify {c['verify_s']:.1f} s "
                f"({'verifies' if c['verifies'] else 'FAILS'})",
                "target": "≤ 2 GB peak" if "exponent" in c else "",
            }
        )
        if "exponent" in c:
            out.append(
                {
                    "measure": "CLI growth exponent of wall time",
                    "value": c["exponent"],
                    "detail": f"{result['cli'][0]['actors']:,} → {c['actors']:,} actors "
                    f"(of CPU time: {c['exponent_cpu']:.2f})",
                    "target": "≤ 1.1",
                }
            )
    b = result["branching"]
    out.append(
        {
            "measure": f"branching ÷ no_branch, {b['actors']:,} actors",
            "value": b["ratio"],
            "detail": f"{b['branching_s']:.1f} s ({b['timelines']} timelines) ÷ "
            f"{b['no_branch_s']:.1f} s",
            "target": "≤ 5",
        }
    )
    for name, seconds in result["card_loading_s"].items():
        out.append({"measure": f"load_card {name}", "value": seconds, "detail": "s", "target": ""})
    return out


if __name__ == "__main__":
    from worldsim.domain.collector import collector_paced

    with collector_paced():  # as the worldsim command runs
        what, args = sys.argv[1], json.loads(sys.argv[2])
        if what == "versus":
            print(json.dumps(_versus_floor(*args)))
        elif what == "policy":
            print(json.dumps(_run_policy(*args)))
        else:
            print(json.dumps(_load_cards(*args)))
