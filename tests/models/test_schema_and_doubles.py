"""Schemas for structured outputs, the invented values, and the in-process test models."""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading
import time
import urllib.request
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from worldsim.domain.errors import ModelError
from worldsim.models import LlmCallData, limit_string_lengths, response_schema, strict_schema
from worldsim.testing import NetworkBlockedError, SchemaModel, ScriptedModel, StubServer, fake_value


class Claim(BaseModel):
    text: str
    weight: int = Field(ge=-3, le=3)


class Review(BaseModel):
    decision: Literal["continue", "terminate", "fork"]
    probability: float = Field(gt=0, lt=1)
    score: float = Field(ge=0, le=1)
    claims: list[Claim] = Field(min_length=1, max_length=4)
    note: str | None = None
    depth: int = Field(default=0, ge=0, le=2)


def test_limit_string_lengths_caps_every_string_and_keeps_tighter_limits() -> None:
    schema = limit_string_lengths(Review.model_json_schema(), 100)
    assert schema["$defs"]["Claim"]["properties"]["text"]["maxLength"] == 100
    assert {"type": "string", "maxLength": 100} in schema["properties"]["note"]["anyOf"]
    assert "maxLength" not in schema["properties"]["decision"]
    tight = limit_string_lengths({"type": "string", "maxLength": 5}, 100)
    assert tight["maxLength"] == 5


def test_strict_schema_closes_objects_and_requires_every_property() -> None:
    shaped, ok = strict_schema(Review.model_json_schema())
    assert ok
    assert shaped["additionalProperties"] is False
    assert set(shaped["required"]) == set(Review.model_fields)
    assert shaped["$defs"]["Claim"]["additionalProperties"] is False
    _, with_limits_ok = response_schema(Review)
    assert not with_limits_ok  # maxLength is outside the strict subset
    _, open_map_ok = strict_schema({"type": "object", "additionalProperties": {"type": "string"}})
    assert not open_map_ok


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_fake_values_validate_against_the_model(seed: int) -> None:
    value = fake_value(Review.model_json_schema(), random.Random(seed))
    review = Review.model_validate(value)
    assert 0 < review.probability < 1


@pytest.mark.asyncio
async def test_schema_model_is_deterministic_per_seed(
    make_request: Any, forecast_type: Any
) -> None:
    a = await SchemaModel(seed=5).request(make_request())
    b = await SchemaModel(seed=5).request(make_request())
    c = await SchemaModel(seed=6).request(make_request())
    assert isinstance(a.output, forecast_type)
    assert a.text == b.text and a.text != c.text
    assert LlmCallData.model_validate(a.call).output_mode == "scripted"


@pytest.mark.asyncio
async def test_scripted_model_replays_lists_and_callables(make_request: Any) -> None:
    reply = {"p_yes": 0.25, "stance": "oppose", "rationale": "slow review"}
    listed = ScriptedModel([reply])
    first = await listed.request(make_request())
    assert first.output.model_dump() == reply
    with pytest.raises(ModelError, match="ran out"):
        await listed.request(make_request())

    def by_agent(request: Any) -> dict[str, Any]:
        return {**reply, "rationale": request.site.agent}

    called = ScriptedModel(by_agent)
    out = await called.request(make_request(agent="regulator"))
    assert out.output.model_dump()["rationale"] == "regulator"
    assert len(called.requests) == 1


@pytest.mark.asyncio
async def test_invalid_scripted_reply_is_a_model_error_with_its_record(make_request: Any) -> None:
    with pytest.raises(ModelError) as caught:
        await ScriptedModel(['{"p_yes": 2}']).request(make_request())
    assert caught.value.call["reply"] == '{"p_yes": 2}'
    assert caught.value.call["error"].startswith("invalid output")


def test_network_guard_blocks_non_loopback_connections() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("203.0.113.7", 443), timeout=0.1)
    sock = socket.socket()
    try:
        with pytest.raises(NetworkBlockedError):
            sock.connect(("198.51.100.1", 80))
    finally:
        sock.close()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        socket.create_connection(server.getsockname(), timeout=1).close()
    finally:
        server.close()


def test_stub_server_works_as_a_sync_context_and_answers_both_paths() -> None:
    schema = {
        "type": "object",
        "properties": {"p_yes": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["p_yes"],
    }
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }
    with StubServer(seed=2) as server:
        replies = []
        for path in ("/v1/chat/completions", "/chat/completions"):
            req = urllib.request.Request(
                f"http://127.0.0.1:{server.port}{path}",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json", "X-Probe": "1"},
            )
            with urllib.request.urlopen(req, timeout=5) as resp:
                replies.append(json.loads(resp.read()))
    assert server.request_count == 2
    assert server.requests[0].headers["x-probe"] == "1"
    for reply in replies:
        content = json.loads(reply["choices"][0]["message"]["content"])
        assert 0 <= content["p_yes"] <= 1
        assert reply["usage"]["total_tokens"] > 0 and reply["choices"][0]["finish_reason"] == "stop"


def test_stub_server_holds_requests_past_hold_after_until_released() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()

    def ask(port: int, timeout: float) -> dict[str, Any]:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            reply: dict[str, Any] = json.loads(resp.read())
            return reply

    with StubServer(seed=2, hold_after=1) as server:
        assert ask(server.port, 5)["choices"][0]["message"]["content"] == "{}"
        with pytest.raises(TimeoutError):  # the second request is not answered
            ask(server.port, 0.5)
        deadline = time.monotonic() + 10
        while server.request_count < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.request_count == 2  # it was received, and is held
        server.release()
        assert ask(server.port, 5)["choices"][0]["message"]["content"] == "{}"
    assert server.request_count == 3


def test_a_stub_server_stopped_while_holding_answers_nothing() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    server = StubServer(seed=2, hold_after=0).start()
    replies: list[object] = []

    def ask() -> None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/v1/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                replies.append(resp.status)
        except (OSError, http.client.HTTPException) as exc:  # closed without an answer
            replies.append(type(exc).__name__)

    asking = threading.Thread(target=ask)
    asking.start()
    deadline = time.monotonic() + 10
    while server.request_count < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.stop()
    asking.join(timeout=15)
    assert server.request_count == 1 and len(replies) == 1
    assert replies[0] != 200, replies


def test_response_schema_is_a_fresh_copy_each_call_and_follows_the_limit() -> None:
    generated = json.loads(json.dumps(Review.model_json_schema(), sort_keys=True))
    expected = strict_schema(limit_string_lengths(generated, 100))
    first = response_schema(Review, max_string_length=100)
    assert first == expected
    first[0]["$defs"]["Claim"]["properties"]["text"]["maxLength"] = 7  # the caller's to edit
    first[0]["required"].clear()
    assert response_schema(Review, max_string_length=100) == expected
    assert response_schema(Review, max_string_length=None) == strict_schema(generated)
    assert response_schema(Review, max_string_length=50) != expected
