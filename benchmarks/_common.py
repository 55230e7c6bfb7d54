"""Helpers shared by the benchmarks: timing, the demo card, tracemalloc, and running coroutines."""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio

from worldsim.domain.cards import Card
from worldsim.domain.files import load_mapping

__all__ = [
    "DEMO_CARD",
    "demo_card",
    "demo_card_data",
    "gc_paused",
    "median_ns",
    "ratio",
    "run_async",
    "traced_bytes",
]

T = TypeVar("T")

DEMO_CARD = Path(__file__).resolve().parent.parent / "scenarios" / "merger-review.yaml"


def demo_card_data() -> dict[str, Any]:
    """The demo card as plain data, to copy and modify, without its evidence documents: the
    benchmarks measure the engine, not the evidence store's searches."""
    data = load_mapping(DEMO_CARD, what="card")
    data.pop("evidence", None)
    return data


def demo_card() -> Card:
    return Card.model_validate(demo_card_data())


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


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """Run one coroutine function to completion in a fresh event loop."""

    async def main() -> T:
        return await fn()

    return anyio.run(main)
