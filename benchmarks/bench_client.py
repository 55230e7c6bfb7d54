"""Client CPU per model call: a whole run against a bare ``AsyncOpenAI`` on the same requests.

Every role of the demo card goes to the stub OpenAI-compatible server (its own process, no
latency). **run**: the CPU time of a process running the card for R replicates, as ``worldsim
run --replicates R`` does (one process, the replicates sharing their HTTP clients), for R = 2
and R = 12; the CPU per call is the difference divided by the difference in requests the stub
served, so start-up and imports cancel out and per-replicate set-up counts. Once with replies
streamed (the default) and once with the route's ``stream: false``. **bare**: the CPU
time of a process that sends the very request bodies the 12-replicate run sent (recorded by the
stub) with ``AsyncOpenAI().chat.completions.create``, reading every streamed chunk, 8 at a time
(the run's default connection limit), and again asked without streaming (the cheapest a client
can do: one JSON body per call). The ratio run ÷ bare is the client's overhead per call;
target ≤ 1.5.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import ROOT, send_bare, stub_process, unstreamed

__all__ = ["rows", "run"]

SMALL, LARGE = 2, 12
CONNECTIONS = 8


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_client", *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _run_replicates(replicates: int, base_url: str, out: str, stream: bool) -> dict[str, Any]:
    """In the child: the card for ``replicates`` seeds, every role on the stub route (its
    replies streamed or not)."""
    import os

    import anyio

    from benchmarks._common import demo_card
    from worldsim.domain.config import ModelConfig, RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.models.pool import HttpClients, Shared
    from worldsim.sim.session import run_card

    os.environ.update({"STUB_API_KEY": "sk-bench", "STUB_BASE_URL": base_url})
    models = ModelConfig(
        model="stub/bench-model", cache="off", routes={"stub/bench-model": {"stream": stream}}
    )
    card, policy = demo_card(), load_policy("branching")

    async def go() -> None:
        async with HttpClients() as clients:
            for seed in range(replicates):
                config = RunConfig(card=card, policy=policy, seed=seed, models=models)
                await run_card(
                    config, out, overwrite=True, fsync=False, shared=Shared(clients=clients)
                )

    cpu, wall = time.process_time(), time.perf_counter()
    anyio.run(go)
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}


def _bare(bodies_file: str, base_url: str, whole: bool) -> dict[str, Any]:
    """In the child: the recorded bodies through a bare client, ``CONNECTIONS`` at a time
    (``whole``: each asked without streaming)."""
    bodies = json.loads(Path(bodies_file).read_text(encoding="utf-8"))
    if whole:
        bodies = unstreamed(bodies)
    cpu, wall = time.process_time(), time.perf_counter()
    send_bare(bodies, base_url, connections=CONNECTIONS)
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}


def run(quick: bool = False) -> dict[str, Any]:
    small, large = (1, 4) if quick else (SMALL, LARGE)
    with tempfile.TemporaryDirectory(prefix="worldsim-client-") as tmp:
        folder = Path(tmp)
        runs: dict[str, dict[int, dict[str, Any]]] = {"streamed": {}, "whole": {}}
        for kind, points in runs.items():
            for replicates in (small, large):
                dump = folder / f"bodies-{kind}-{replicates}.json"
                with stub_process(dump=dump) as base_url:
                    points[replicates] = _child(
                        "run", kind, str(replicates), base_url, str(folder / f"out{replicates}")
                    )
                points[replicates]["calls"] = len(json.loads(dump.read_text(encoding="utf-8")))
        bare = {}
        for kind in ("streamed", "whole"):
            with stub_process(dump=folder / f"bare-{kind}.json") as base_url:
                bare[kind] = _child(
                    "bare", kind, str(folder / f"bodies-streamed-{large}.json"), base_url
                )
            bare[kind]["calls"] = runs["streamed"][large]["calls"]
    run_per_call = {
        kind: (points[large]["cpu_s"] - points[small]["cpu_s"])
        / (points[large]["calls"] - points[small]["calls"])
        for kind, points in runs.items()
    }
    bare_per_call = {k: b["cpu_s"] / b["calls"] for k, b in bare.items()}
    return {
        "what": "CPU per model call, demo card with every role on a zero-latency stub server",
        "replicates": [small, large],
        "runs": {kind: {str(k): v for k, v in points.items()} for kind, points in runs.items()},
        "bare": bare,
        "run_cpu_ms_per_call": {k: 1000 * v for k, v in run_per_call.items()},
        "bare_cpu_ms_per_call": {k: 1000 * v for k, v in bare_per_call.items()},
        "ratio": {k: run_per_call[k] / v for k, v in bare_per_call.items()},
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    small, large = result["replicates"]
    table = []
    for kind, label in (("streamed", "streamed (the default)"), ("whole", "not streamed")):
        points = result["runs"][kind]
        table.append(
            {
                "replies": label,
                "run calls": f"{points[str(small)]['calls']} → {points[str(large)]['calls']}",
                "run CPU ms per call": round(result["run_cpu_ms_per_call"][kind], 2),
                "bare client CPU ms per call": round(result["bare_cpu_ms_per_call"][kind], 2),
                "run ÷ bare": round(result["ratio"][kind], 2),
            }
        )
    return table


if __name__ == "__main__":
    from worldsim.domain.collector import collector_paced

    with collector_paced():  # as the worldsim command runs
        what, kind, *rest = sys.argv[1:]
        if what == "run":
            point = _run_replicates(int(rest[0]), rest[1], rest[2], stream=kind == "streamed")
        else:
            point = _bare(rest[0], rest[1], whole=kind == "whole")
        print(json.dumps(point))
