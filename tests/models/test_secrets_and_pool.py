"""A run's model stack from the environment, and keys that never leave the request headers."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from worldsim.domain.errors import ConfigError, ModelError
from worldsim.models import (
    Budget,
    CachedModel,
    LeakageGuard,
    LeakageGuardModel,
    ModelOptions,
    ModelPool,
    OpenAIModel,
    ResponseCache,
    RouteTable,
)
from worldsim.testing import Faults, SchemaModel, StubReply, StubServer

PLANTED = "sk-planted-4f1c9e0b7d2a-SECRET"


def _file_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.mark.asyncio
async def test_planted_key_reaches_only_the_authorization_header(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    make_request: Any,
    fast_retry: Any,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("STUB_API_KEY", PLANTED)
    cache_path = tmp_path / "cache.sqlite"
    records: list[dict[str, Any]] = []
    reply = {"p_yes": 0.3, "stance": "neutral", "rationale": "steady"}

    def script(body: dict[str, Any]) -> Any:
        bad = any("fail-me" in m["content"] for m in body["messages"])
        return {**reply, "p_yes": 7} if bad else reply

    with capture_logs() as logs:
        async with StubServer(script, faults=Faults(reject_json_schema=True)) as server:
            monkeypatch.setenv("STUB_BASE_URL", server.base_url)
            cache = await ResponseCache.open(cache_path)
            pool = ModelPool(
                RouteTable.from_flags("stub/test-model"),
                options=ModelOptions(retry=fast_retry()),
                cache=cache,
                budget=Budget(1.0),
                guard=LeakageGuard.from_strings(["nothing-forbidden"]),
                dotenv=None,
            )
            model = pool.for_role("actor")
            for i in range(3):
                records.append(dict((await model.request(make_request(index=i))).call))
            with pytest.raises(ModelError) as caught:
                await model.request(make_request("fail-me", index=9))
            records.append(caught.value.call)
            await pool.aclose()
            await cache.aclose()

    assert server.requests[0].headers["authorization"] == f"Bearer {PLANTED}"
    assert len(records) == 4 and records[-1]["error"] is not None
    assert PLANTED not in json.dumps(records)
    assert PLANTED not in str(caught.value) and PLANTED not in repr(
        pool.client(pool.routes.default)
    )
    files = _file_bytes(tmp_path)
    assert files and all(PLANTED.encode() not in data for data in files.values())
    assert any(e["event"] == "output mode downgraded" for e in logs)
    assert PLANTED not in json.dumps(logs, default=str)
    assert PLANTED not in caplog.text
    out = capsys.readouterr()
    assert PLANTED not in out.out + out.err
    for body in (r.body for r in server.requests):
        assert PLANTED not in json.dumps(body)


@pytest.mark.asyncio
async def test_pool_wraps_remote_routes_and_shares_them_between_roles(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STUB_BASE_URL", "http://127.0.0.1:9/v1")
    cache = await ResponseCache.open(tmp_path / "c.sqlite")
    pool = ModelPool(
        RouteTable.from_flags("offline", ["actor=stub/m1", "cohort=stub/m1"]),
        cache=cache,
        guard=LeakageGuard.from_strings([]),
        offline=SchemaModel,
        dotenv=None,
    )
    actor = pool.for_role("actor")
    assert actor is pool.for_role("cohort")
    assert isinstance(actor, LeakageGuardModel) and isinstance(actor.inner, CachedModel)
    assert actor.route == "stub/m1"
    offline = pool.for_role("governance")
    assert isinstance(offline, LeakageGuardModel) and isinstance(offline.inner, SchemaModel)
    await pool.aclose()
    await cache.aclose()


def test_pool_fails_before_the_run_when_a_route_is_not_configured(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        ModelPool(
            RouteTable.from_flags("offline", ["actor=acme-ai/big"]),
            offline=SchemaModel,
            environ={},
            dotenv=tmp_path / "missing.env",
        )
    assert caught.value.field == "ACME_AI_BASE_URL"
    with pytest.raises(ConfigError):
        ModelPool(RouteTable.from_flags("offline"), environ={}, dotenv=None)


@pytest.mark.asyncio
async def test_a_key_echoed_in_a_server_error_is_redacted(
    make_request: Any, fast_retry: Any
) -> None:
    echo = StubReply(401, {"error": {"message": f"Incorrect API key provided: {PLANTED}"}})
    async with StubServer(lambda body: echo) as server:
        model = OpenAIModel(server.settings(api_key=PLANTED), retry=fast_retry())
        with pytest.raises(ModelError) as caught:
            await model.request(make_request())
        await model.aclose()
    assert caught.value.call["errors"][0]["status"] == 401
    assert "[redacted]" in caught.value.call["errors"][0]["message"]
    assert PLANTED not in json.dumps(caught.value.call) and PLANTED not in str(caught.value)
