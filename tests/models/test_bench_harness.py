"""The scheduler benchmark harness runs and reports its fields (no timing assertions)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scheduler_stub.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scheduler_stub", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.asyncio
async def test_bench_harness_reports_wall_ideal_and_ratio() -> None:
    bench = _load()
    seen: list[int] = []

    async def workload(model: Any, calls: int) -> None:
        for i in range(calls):
            await model.request(bench.bench_request(i))
            seen.append(i)

    result = await bench.run_async(
        calls=6, connections=2, latency_s=0.005, workload=workload, critical_path=6
    )
    assert seen == list(range(6))
    assert result["requests"] == 6 and result["max_concurrency"] == 1
    assert result["ideal_s"] == pytest.approx(0.03)
    assert result["ratio"] == pytest.approx(result["wall_s"] / result["ideal_s"], rel=0.01)
    row = bench.table_row(result)
    assert len(row.split("|")) == len(bench.COLUMNS)
