"""The per-route limiter and the response cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from worldsim.domain.errors import ConfigError, ReplayMissError
from worldsim.models import CachedModel, OpenAIModel, ResponseCache, RouteLimiters
from worldsim.testing import SchemaModel, StubServer


@pytest.mark.asyncio
async def test_limiter_never_exceeds_max_connections(make_request: Any, fast_retry: Any) -> None:
    limiters = RouteLimiters(max_connections=3)
    async with StubServer(latency_s=0.03) as server:
        # two models on the same route share one limiter, as timelines do
        models = [
            OpenAIModel(
                server.settings(), retry=fast_retry(), limiter=limiters.get("stub/test-model")
            )
            for _ in range(2)
        ]
        async with anyio.create_task_group() as tg:
            for i in range(24):
                tg.start_soon(models[i % 2].request, make_request(index=i))
        for m in models:
            await m.aclose()
    assert server.request_count == 24
    assert server.max_concurrency == 3
    assert limiters.get("stub/test-model") is models[0].limiter


@pytest.mark.asyncio
async def test_cache_hit_makes_no_server_call(
    tmp_path: Path, make_request: Any, fast_retry: Any
) -> None:
    path = tmp_path / "cache.sqlite"
    async with StubServer() as server:
        async with await ResponseCache.open(path) as cache:
            model = CachedModel(OpenAIModel(server.settings(), retry=fast_retry()), cache)
            first = await model.request(make_request())
        assert server.request_count == 1
        async with await ResponseCache.open(path) as cache:
            inner = OpenAIModel(server.settings(), retry=fast_retry())
            model = CachedModel(inner, cache)
            again = await model.request(make_request())
            await inner.aclose()
        assert server.request_count == 1

    assert first.call["cache"] == "miss"
    assert again.call["cache"] == "hit"
    assert again.call["attempts"] == 0 and again.call["latency_s"] == 0.0
    assert again.text == first.text and again.output == first.output
    for key in ("request_hash", "response_id", "resolved_model", "usage", "reply", "output_mode"):
        assert again.call[key] == first.call[key]


@pytest.mark.asyncio
async def test_cache_key_includes_the_call_position(tmp_path: Path, make_request: Any) -> None:
    inner = SchemaModel(seed=1)
    async with await ResponseCache.open(tmp_path / "c.sqlite") as cache:
        model = CachedModel(inner, cache)
        await model.request(make_request(timeline="t0.1"))
        await model.request(make_request(timeline="t0.2"))
        await model.request(make_request(timeline="t0.1"))
        assert len(inner.requests) == 2
        assert await cache.count() == 2


@pytest.mark.asyncio
async def test_strict_replay_miss_is_an_error(tmp_path: Path, make_request: Any) -> None:
    inner = SchemaModel()
    async with await ResponseCache.open(tmp_path / "c.sqlite", strict=True) as cache:
        with pytest.raises(ReplayMissError) as caught:
            await CachedModel(inner, cache).request(make_request(tick=4))
    assert inner.requests == []
    assert caught.value.tick == 4 and "strict replay" in str(caught.value)


@pytest.mark.asyncio
async def test_refresh_skips_reads_and_overwrites(tmp_path: Path, make_request: Any) -> None:
    path = tmp_path / "c.sqlite"
    async with await ResponseCache.open(path) as cache:
        await CachedModel(SchemaModel(seed=1), cache).request(make_request())
    refreshed = SchemaModel(seed=2)
    async with await ResponseCache.open(path, mode="refresh") as cache:
        fresh = await CachedModel(refreshed, cache).request(make_request())
    assert len(refreshed.requests) == 1 and fresh.call["cache"] == "miss"
    async with await ResponseCache.open(path) as cache:
        hit = await CachedModel(SchemaModel(seed=3), cache).request(make_request())
    assert hit.text == fresh.text


@pytest.mark.asyncio
async def test_cache_off_passes_through(tmp_path: Path, make_request: Any) -> None:
    inner = SchemaModel()
    async with await ResponseCache.open(tmp_path / "c.sqlite", mode="off") as cache:
        model = CachedModel(inner, cache)
        a = await model.request(make_request())
        await model.request(make_request())
        assert await cache.count() == 0
    assert len(inner.requests) == 2 and a.call["cache"] == "off"


@pytest.mark.asyncio
async def test_strict_replay_requires_the_use_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        await ResponseCache.open(tmp_path / "c.sqlite", mode="refresh", strict=True)
