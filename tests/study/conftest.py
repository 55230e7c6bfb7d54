"""Small studies for the study tests: two demo cards, short runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import ROOT

CARDS = [
    str(ROOT / "scenarios" / "merger-review.yaml"),
    str(ROOT / "scenarios" / "product-launch.yaml"),
]


def write_manifest(folder: Path, **changes: Any) -> Path:
    """A manifest in ``folder``: two cards, two offline methods, two dates, two seeds."""
    data: dict[str, Any] = {
        "name": "small-study",
        "cards": CARDS,
        "seeds": [0, 1],
        "forecast_dates": ["card", "mid"],
        "methods": [
            {"label": "branching", "run": {"policy": "branching", "model": "offline", "ticks": 3}},
            {"label": "direct", "forecast": {"model": "offline"}},
        ],
        "max_parallel_jobs": 2,
    }
    data.update(changes)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


STUB_RETRY: dict[str, Any] = {
    "max_attempts": 40,
    "timeout_s": 5,
    "backoff_initial_s": 0.001,
    "backoff_max_s": 0.01,
    "jitter_s": 0.001,
    "retry_after_cap_s": 0.02,
}
"""Retries for a stub server that throttles: many, and quick."""


def stub_manifest(folder: Path, **changes: Any) -> Path:
    """Both demo cards, a short run and a direct forecast on the stub route, four jobs at once."""
    return write_manifest(
        folder,
        cards=CARDS,
        seeds=[0, 1],
        forecast_dates=["card"],
        methods=[
            {
                "label": "stub",
                "run": {
                    "policy": "no_branch",
                    "model": "stub/test-model",
                    "ticks": 2,
                    "retry": STUB_RETRY,
                },
            },
            {"label": "stub-direct", "forecast": {"model": "stub/test-model", "retry": STUB_RETRY}},
        ],
        max_parallel_jobs=4,
        **changes,
    )


def priced_manifest(folder: Path, cap: float, retry: dict[str, Any]) -> Path:
    """Twelve seeds of one priced direct forecast (each could spend ``cap`` alone) under a
    study budget of ``cap``, three jobs at once."""
    prices = folder / "prices.yaml"
    prices.write_text("models:\n  test-model: {input: 100.0, output: 100.0}\n")
    return write_manifest(
        folder,
        cards=[CARDS[0]],
        seeds=list(range(12)),
        forecast_dates=["card"],
        methods=[
            {
                "label": "d",
                "forecast": {"model": "stub/test-model", "prices": str(prices), "retry": retry},
            }
        ],
        max_cost_usd=cap,
        max_parallel_jobs=3,
    )


def on_route_and_offline(folder: Path, jobs: int, cap: float | None) -> Path:
    """``jobs`` seeds of one card, each run on the priced stub route and on the offline route,
    all at once, one request at a time on the stub route, under a budget of ``cap``."""
    prices = folder / "prices.yaml"
    prices.write_text("models:\n  test-model: {input: 0.15, output: 0.60}\n")
    run = {"policy": "no_branch", "model": "stub/test-model", "ticks": 2, "prices": str(prices)}
    return write_manifest(
        folder,
        cards=[CARDS[0]],
        seeds=list(range(jobs)),
        forecast_dates=["card"],
        methods=[
            {"label": "stub", "run": run},
            {"label": "offline", "run": {"policy": "no_branch", "model": "offline", "ticks": 2}},
        ],
        max_parallel_jobs=2 * jobs,
        max_connections=1,
        max_cost_usd=cap,
    )


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    return write_manifest(tmp_path)
