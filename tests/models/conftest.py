"""Fixtures for the model-layer tests: a small output model, fast retries, recorded sleeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from worldsim.domain.contracts import CallSite, ChatMessage, ModelRequest
from worldsim.models import RetryPolicy


class Forecast(BaseModel):
    """A small output model with bounds and a literal, like the roles' outputs."""

    p_yes: float = Field(ge=0, le=1)
    stance: Literal["support", "oppose", "neutral"]
    rationale: str = Field(max_length=400)


def _make_request(
    text: str = "Will the regulator approve the merger?",
    *,
    index: int = 0,
    agent: str = "a1",
    timeline: str | None = "t0",
    tick: int | None = 1,
    seed: int | None = 7,
) -> ModelRequest:
    return ModelRequest(
        messages=(
            ChatMessage("system", "You forecast events."),
            ChatMessage("user", text),
        ),
        output_type=Forecast,
        site=CallSite(role="actor", agent=agent, timeline=timeline, tick=tick, index=index),
        prompt_version="abc123def456",
        temperature=0.2,
        seed=seed,
        max_tokens=256,
    )


class SleepRecorder:
    """A sleep for `RetryPolicy` that records waits and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _fast_retry(**overrides: float | int) -> RetryPolicy:
    """Tiny backoff and timeout so fault tests run in well under a second each."""
    values: dict[str, float | int] = {
        "max_attempts": 5,
        "timeout_s": 2.0,
        "backoff_initial_s": 0.001,
        "backoff_max_s": 0.01,
        "jitter_s": 0.001,
        "retry_after_cap_s": 0.01,
    }
    values.update(overrides)
    return RetryPolicy(**values)  # type: ignore[arg-type]


MakeRequest = Callable[..., ModelRequest]
FastRetry = Callable[..., RetryPolicy]


@pytest.fixture
def make_request() -> MakeRequest:
    """Build a `ModelRequest` for `Forecast` (keyword overrides: text, index, agent, ...)."""
    return _make_request


@pytest.fixture
def fast_retry() -> FastRetry:
    """Build a `RetryPolicy` with tiny waits (keyword overrides allowed)."""
    return _fast_retry


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def forecast_type() -> type[Forecast]:
    return Forecast
