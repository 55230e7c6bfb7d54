"""Scheduler wall time against the latency-bound ideal, on the stub server.

N model calls go through one route's `CapacityLimiter` to a `StubServer` that answers every
request after a fixed latency. The ideal wall time is what latency alone forces: the calls in
waves of ``connections`` (``ceil(calls / connections) · latency``), or the workload's critical
path of dependent calls if that is longer. The ratio ``wall / ideal`` is the overhead factor
(1.0 is perfect).

The workload is pluggable: any ``async (model, calls) -> None`` that makes ``calls`` requests
through ``model``; the default fans them out in one task group. Run as a script to print a
table row and write JSON::

    python benchmarks/bench_scheduler_stub.py --calls 200 --connections 8 --latency 0.05
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, Field

from worldsim.domain.contracts import CallSite, ChatMessage, Model, ModelRequest
from worldsim.models import OpenAIModel, RetryPolicy, RouteLimiters
from worldsim.testing import StubServer

Workload = Callable[[Model, int], Awaitable[None]]

COLUMNS = ("calls", "connections", "latency_s", "wall_s", "ideal_s", "ratio", "max_concurrency")


class BenchOutput(BaseModel):
    p_yes: float = Field(ge=0, le=1)
    note: str


_REPLY = {"p_yes": 0.5, "note": "steady"}


def bench_request(index: int) -> ModelRequest:
    return ModelRequest(
        messages=(ChatMessage("user", f"call {index}"),),
        output_type=BenchOutput,
        site=CallSite(role="actor", agent=f"a{index % 16}", timeline="t0", tick=0, index=index),
        prompt_version="bench",
    )


async def fan_out(model: Model, calls: int) -> None:
    """All calls at once, in one task group: the scheduler's best case."""
    async with anyio.create_task_group() as tg:
        for i in range(calls):
            tg.start_soon(model.request, bench_request(i))


async def run_async(
    *,
    calls: int = 200,
    connections: int = 8,
    latency_s: float = 0.05,
    workload: Workload = fan_out,
    critical_path: int = 1,
) -> dict[str, Any]:
    """Run ``workload`` against a stub server and measure it; see `run`."""
    # steady throughput: the route's limit starts at its maximum instead of growing to it
    limiters = RouteLimiters(max_connections=connections, start=connections)
    # a fixed reply keeps the stub's own work (it shares this process) out of the measurement
    async with StubServer(lambda body: _REPLY, latency_s=latency_s) as server:
        settings = server.settings("stub/bench-model")
        model = OpenAIModel(
            settings,
            retry=RetryPolicy(max_attempts=1, timeout_s=max(10.0, latency_s * 20)),
            limiter=limiters.get(settings.route.name),
        )
        await model.request(bench_request(-1))  # warm the connection pool and the imports
        warm = server.request_count
        started = time.perf_counter()
        await workload(model, calls)
        wall = time.perf_counter() - started
        await model.aclose()
        requests = server.request_count - warm
        peak = server.max_concurrency
    ideal = max(math.ceil(calls / connections), critical_path) * latency_s
    return {
        "bench": "scheduler_stub",
        "calls": calls,
        "connections": connections,
        "latency_s": latency_s,
        "critical_path": critical_path,
        "requests": requests,
        "wall_s": round(wall, 4),
        "ideal_s": round(ideal, 4),
        "ratio": round(wall / ideal, 3) if ideal > 0 else None,
        "max_concurrency": peak,
    }


def run(
    *,
    calls: int = 200,
    connections: int = 8,
    latency_s: float = 0.05,
    workload: Workload = fan_out,
    critical_path: int = 1,
) -> dict[str, Any]:
    """Measure ``workload`` making ``calls`` model calls through a limiter of ``connections``
    against a stub answering after ``latency_s``; returns wall time, ideal and their ratio."""

    async def main() -> dict[str, Any]:
        return await run_async(
            calls=calls,
            connections=connections,
            latency_s=latency_s,
            workload=workload,
            critical_path=critical_path,
        )

    return anyio.run(main)


def table_header() -> str:
    return " | ".join(f"{c:>15}" for c in COLUMNS)


def table_row(result: dict[str, Any]) -> str:
    return " | ".join(f"{result[c]!s:>15}" for c in COLUMNS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    result = run(calls=args.calls, connections=args.connections, latency_s=args.latency)
    print(table_header())
    print(table_row(result))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_scheduler_stub.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    from worldsim.domain.collector import collector_paced

    with collector_paced():  # as the worldsim command runs
        main()
