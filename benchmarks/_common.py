"""Helpers shared by the benchmarks: timing, the demo card, tracemalloc, and running coroutines."""

from __future__ import annotations

import gc
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from openai import AsyncOpenAI

from worldsim.domain.cards import Card
from worldsim.domain.files import load_mapping

__all__ = [
    "DEMO_CARD",
    "ROOT",
    "demo_card",
    "demo_card_data",
    "gc_paused",
    "generated_actors_card",
    "median_ns",
    "ratio",
    "run_async",
    "stub_process",
    "traced_bytes",
]

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
DEMO_CARD = ROOT / "scenarios" / "merger-review.yaml"

_SERVE = """
import json, sys
from worldsim.testing import StubServer
with StubServer(latency_s=float(sys.argv[1]), seed=1) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
    bodies = [r.body for r in server.requests]
if sys.argv[2]:
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        json.dump(bodies, out)
"""


@contextmanager
def stub_process(latency_s: float = 0.0, dump: Path | None = None) -> Iterator[str]:
    """The stub OpenAI-compatible server in its own process (so that its work does not share
    the measured process's core), yielding its base URL; on exit, with ``dump``, the request
    bodies it served are written there as JSON."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(latency_s), str(dump or "")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)


def demo_card_data() -> dict[str, Any]:
    """The demo card as plain data, to copy and modify: evidence, cohorts and all, as users run
    it (a run searches and reads its evidence documents through the gateway)."""
    return load_mapping(DEMO_CARD, what="card")


def demo_card() -> Card:
    return Card.model_validate(demo_card_data())


def generated_actors_card(actors: int, *, activity: float = 0.8) -> Card:
    """The demo card with ``actors`` generated actors (stance spread over [-1, 1], varied
    influence) in place of its own; its evidence, cohorts, events and hypotheses are kept, and
    the first 20 actors influence its cohorts."""
    data = demo_card_data()
    seeds = data["seeds"]
    seeds["actors"] = [
        {
            "id": f"actor_{i:05d}",
            "name": f"Actor {i}",
            "kind": "institution" if i % 3 else "individual",
            "stance": round(((i * 37) % 201) / 100.0 - 1.0, 2),
            "influence": round(0.2 + 0.6 * ((i * 53) % 101) / 100.0, 2),
            "activity": activity,
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


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector around a timed region, as ``timeit`` does."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def median_ns(fn: Callable[[], object], *, loops: int, repeats: int) -> float:
    """Median over ``repeats`` samples of the per-call time of ``fn`` (ns), ``loops`` calls each."""
    samples: list[float] = []
    for _ in range(repeats):
        with gc_paused():
            start = time.perf_counter_ns()
            for _ in range(loops):
                fn()
            samples.append((time.perf_counter_ns() - start) / loops)
    return statistics.median(samples)


def traced_bytes(make: Callable[[], T]) -> tuple[T, int, int]:
    """Call ``make`` under tracemalloc; return its result, the bytes it still holds, and the peak.

    Only allocations made while tracing are counted, so what existed before (the shared parent
    state) is never charged to the result.
    """
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        value = make()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return value, current - before, peak - before


def agent_steps(trace: bytes) -> int:
    """The proposals a trace's bytes hold, one per agent that acted, a tick: each has exactly
    one ``unretrieved_citations`` key, and those bytes cannot occur inside a JSON string (its
    quotes would be escaped). Counted without parsing the trace, so that the count adds little
    to a process whose instructions ``bench_steps`` counts."""
    return trace.count(b'"unretrieved_citations":')


def peak_rss_mb() -> float:
    """This process's peak resident set, in MB: Linux's ``VmHWM``, which starts afresh when a
    program is executed. (``ru_maxrss`` does not: a point run by a large runner reports the
    runner's peak when its own is lower.) Elsewhere, ``ru_maxrss``."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """Run one coroutine function to completion in a fresh event loop."""

    async def main() -> T:
        return await fn()

    return anyio.run(main)


def send_bare(
    bodies: Sequence[dict[str, Any]], base_url: str, *, connections: int, waves: Sequence[int] = ()
) -> None:
    """Send request bodies through a bare ``AsyncOpenAI`` (at most ``connections`` in flight),
    reading every chunk of a streamed reply: all at once, or in ``waves`` of those sizes, each
    wave once the last reply of the one before is read."""

    async def go() -> None:
        client = AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
        limiter = anyio.CapacityLimiter(connections)

        async def send(body: dict[str, Any]) -> None:
            async with limiter:
                reply = await client.chat.completions.create(**body)
                if body.get("stream"):
                    async for _ in reply:
                        pass

        start = 0
        for size in waves or (len(bodies),):
            async with anyio.create_task_group() as tg:
                for body in bodies[start : start + size]:
                    tg.start_soon(send, body)
            start += size
        await client.close()

    anyio.run(go)


def unstreamed(bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same request bodies asking for whole replies."""
    return [{k: v for k, v in b.items() if k not in ("stream", "stream_options")} for b in bodies]
