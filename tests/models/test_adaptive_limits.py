"""Adaptive connection limits: grow while calls succeed, shrink on 429 / 5xx / timeouts, honour
Retry-After for the whole route, recover; and a study's jobs share one limit per route."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from worldsim.models import OpenAIModel, RouteLimiters
from worldsim.models.limits import ADAPTIVE_START, AdaptiveLimiter
from worldsim.testing import Faults, StubServer


async def _ticket(limiter: AdaptiveLimiter) -> Any:
    async with limiter as ticket:
        return ticket


@pytest.mark.asyncio
async def test_slow_start_then_additive_growth_and_a_shrink_per_epoch() -> None:
    limiter = AdaptiveLimiter("r/m", 20)
    assert limiter.limit == ADAPTIVE_START
    for _ in range(3):
        limiter.succeeded(await _ticket(limiter))
    assert limiter.limit == ADAPTIVE_START + 3  # slow start: one more per success
    stale = await _ticket(limiter)
    old = await _ticket(limiter)
    limiter.congested(old, "rate_limit", None)
    assert limiter.limit == int((ADAPTIVE_START + 3) * 0.8)
    limiter.congested(stale, "rate_limit", None)  # sent under the larger limit: no second shrink
    assert limiter.limit == int((ADAPTIVE_START + 3) * 0.8)
    shrunk = limiter.limit
    for _ in range(shrunk - 1):
        limiter.succeeded(await _ticket(limiter))
    assert limiter.limit == shrunk  # after congestion: one more per window of `limit` successes
    limiter.succeeded(await _ticket(limiter))
    assert limiter.limit == shrunk + 1
    assert [c.reason for c in limiter.history][-2:] == ["rate_limit", "grow"]


@given(
    maximum=st.integers(1, 40),
    events=st.lists(
        st.tuples(st.sampled_from(["ok", "rate_limit", "server_error", "timeout"]), st.booleans()),
        max_size=80,
    ),
)
def test_the_limit_stays_between_one_and_the_maximum(
    maximum: int, events: list[tuple[str, bool]]
) -> None:
    async def main() -> None:
        limiter = AdaptiveLimiter("r/m", maximum)
        old = await _ticket(limiter)
        for kind, stale in events:
            ticket = old if stale else await _ticket(limiter)
            if kind == "ok":
                limiter.succeeded(ticket)
            else:
                limiter.congested(ticket, kind, None)
            assert 1 <= limiter.limit <= maximum
        assert all(1 <= c.limit <= maximum for c in limiter.history)

    anyio.run(main)


@pytest.mark.asyncio
async def test_retry_after_pauses_every_call_on_the_route() -> None:
    limiter = AdaptiveLimiter("r/m", 4)
    ticket = await _ticket(limiter)
    told = anyio.current_time()
    limiter.congested(ticket, "rate_limit", 0.3)
    async with limiter:  # another call, not the one that was told
        waited = anyio.current_time() - told
    assert waited >= 0.29


@pytest.mark.asyncio
async def test_a_throttling_server_shrinks_the_limit_and_it_recovers(
    make_request: Any, fast_retry: Any
) -> None:
    limiters = RouteLimiters(max_connections=16)
    faults = Faults(retry_after="0.05")
    async with StubServer(latency_s=0.1, faults=faults, capacity=3, capacity_requests=60) as server:
        model = OpenAIModel(
            server.settings(),
            retry=fast_retry(max_attempts=30, retry_after_cap_s=0.05),
            limiter=limiters.get("stub/test-model"),
        )
        async with anyio.create_task_group() as tg:
            for i in range(120):
                tg.start_soon(model.request, make_request(index=i))
        await model.aclose()
    history = limiters.get("stub/test-model").history
    reasons = [c.reason for c in history]
    assert server.fault_counts["rate_limit"] > 0
    assert "rate_limit" in reasons
    first_shrink = reasons.index("rate_limit")
    low = min(c.limit for c in history[first_shrink:])
    assert low <= 3
    assert history[-1].limit > low  # once the server stopped throttling, it grew again
    assert server.max_concurrency <= 16
