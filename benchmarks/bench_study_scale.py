"""A study's cost per job as it grows: 10², 10³ and 10⁴ direct offline jobs.

Each study forecasts the six demo cards with the offline model (``forecast: {model: offline}``),
as many seeds as it takes to reach N jobs, into a fresh folder; its wall time divided by N is the
per-job cost: running the job, appending its line to the job log, reading its trace back for its
row, and (once, at the end) writing the tables. A study whose bookkeeping grew with its size
would show a rising per-job cost; the row ``ratio`` is each size's per-job time over the
smallest size's (target: at most 1.3 at 10× the jobs). Traces are written without fsync, so the
disk's flush time stays out.

Run alone::

    python -m benchmarks.bench_study_scale 100 1000
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from worldsim.study.experiment import Experiment

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
CARDS = sorted(str(p) for p in SCENARIOS.glob("*.yaml"))
COLUMNS = ("jobs", "wall_s", "per_job_ms", "ratio")


def _manifest(folder: Path, jobs: int) -> Path:
    seeds = -(-jobs // len(CARDS))  # enough seeds for N jobs over the cards
    data = {
        "name": "bench-study-scale",
        "cards": CARDS,
        "seeds": list(range(seeds)),
        "forecast_dates": ["card"],
        "methods": [{"label": "direct", "forecast": {"model": "offline"}}],
        "max_parallel_jobs": 4,
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def measure(jobs: int) -> dict[str, Any]:
    """One study of about ``jobs`` direct offline jobs: its wall time and time per job."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        experiment = Experiment.from_yaml(_manifest(folder, jobs))
        started = time.perf_counter()
        rows = experiment.run_sync(folder / "out", fsync=False)
        wall = time.perf_counter() - started
    if any(r.status != "complete" for r in rows):
        raise RuntimeError("bench study scale: a job did not complete")
    return {"jobs": len(rows), "wall_s": round(wall, 3), "per_job_ms": 1000 * wall / len(rows)}


def run(quick: bool = False) -> dict[str, Any]:
    """10², 10³ and 10⁴ jobs (``quick``: 10² and 10³)."""
    sizes = (102, 1002) if quick else (102, 1002, 10002)
    return _result([measure(n) for n in sizes])


def _result(runs: list[dict[str, Any]]) -> dict[str, Any]:
    base = runs[0]["per_job_ms"]
    for r in runs:
        r["ratio"] = round(r["per_job_ms"] / base, 3)
        r["per_job_ms"] = round(r["per_job_ms"], 2)
    return {"runs": runs, "target": 1.3}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{c: r[c] for c in COLUMNS} for r in result["runs"]]


if __name__ == "__main__":
    result = _result([measure(int(n)) for n in sys.argv[1:] or ("102", "1002")])
    for row in rows(result):
        print("  ".join(f"{c}={row[c]}" for c in COLUMNS))
