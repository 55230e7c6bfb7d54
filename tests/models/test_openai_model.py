"""OpenAIModel against the stub server: metadata, output-mode negotiation, repair, failures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from worldsim.domain.errors import ModelError
from worldsim.models import LlmCallData, OpenAIModel, PriceTable, request_hash
from worldsim.testing import Faults, StubServer


@pytest.mark.asyncio
async def test_schema_valid_round_trip_records_full_metadata(
    make_request: Any, fast_retry: Any, forecast_type: Any
) -> None:
    prices = PriceTable.load()
    async with StubServer(seed=3) as server:
        model = OpenAIModel(server.settings("stub/gpt-4o-mini"), retry=fast_retry(), prices=prices)
        request = make_request()
        response = await model.request(request)
        await model.aclose()

    assert isinstance(response.output, forecast_type)
    assert 0 <= response.output.p_yes <= 1
    call = LlmCallData.model_validate(response.call)
    assert (call.role, call.agent, call.timeline, call.tick, call.index) == (
        "actor",
        "a1",
        "t0",
        1,
        0,
    )
    assert call.provider == "stub"
    assert call.base_url_host == f"127.0.0.1:{server.port}"
    assert call.requested_model == "gpt-4o-mini"
    assert call.resolved_model == "gpt-4o-mini-2026-01-01"
    assert call.response_id == "chatcmpl-stub3-000000"
    assert call.system_fingerprint == "fp_stub0003"
    assert call.prompt_version == "abc123def456"
    assert call.request_hash == request_hash(
        request, model="gpt-4o-mini", output_mode="json_schema"
    )
    assert (call.temperature, call.seed, call.max_tokens) == (0.2, 7, 256)
    assert call.usage.input_tokens > 0 and call.usage.output_tokens > 0
    assert call.attempts == 1 and call.errors == []
    assert call.cache == "off"
    assert call.finish_reason == "stop"
    assert call.error is None
    assert call.output_mode == "json_schema"
    assert call.reply == response.text
    assert call.cost_usd is not None and call.cost_usd > 0
    assert call.latency_s > 0

    sent = server.requests[0].body
    assert sent["response_format"]["type"] == "json_schema"
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["p_yes"]["maximum"] == 1
    assert schema["properties"]["rationale"]["maxLength"] == 400
    assert sent["seed"] == 7 and sent["max_tokens"] == 256


@pytest.mark.asyncio
async def test_llama_cpp_rejection_falls_back_to_json_object_and_is_remembered(
    make_request: Any, fast_retry: Any, forecast_type: Any
) -> None:
    async with StubServer(faults=Faults(reject_json_schema=True)) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry())
        first = await model.request(make_request(index=0))
        second = await model.request(make_request(index=1))
        await model.aclose()

    assert isinstance(first.output, forecast_type)
    assert first.call["output_mode"] == "json_object"
    assert [e["kind"] for e in first.call["errors"]] == ["format_rejected"]
    assert first.call["errors"][0]["status"] == 500
    assert first.call["attempts"] == 2
    assert model.output_mode == "json_object"
    # the second call starts in the negotiated mode: one request, no rejection
    assert second.call["output_mode"] == "json_object"
    assert second.call["attempts"] == 1 and second.call["errors"] == []
    bodies = [r.body for r in server.requests]
    assert [b["response_format"]["type"] for b in bodies] == [
        "json_schema",
        "json_object",
        "json_object",
    ]
    assert "JSON schema" in bodies[1]["messages"][0]["content"]


@pytest.mark.asyncio
async def test_server_rejecting_every_response_format_falls_back_to_text(
    make_request: Any, fast_retry: Any
) -> None:
    async with StubServer(faults=Faults(reject_response_format=True)) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry())
        response = await model.request(make_request())
        await model.aclose()

    assert response.call["output_mode"] == "text"
    assert [e["kind"] for e in response.call["errors"]] == ["format_rejected", "format_rejected"]
    assert "response_format" not in server.requests[-1].body
    assert model.output_mode == "text"


@pytest.mark.asyncio
async def test_out_of_bounds_reply_gets_one_repair_then_a_recorded_failure(
    make_request: Any, fast_retry: Any
) -> None:
    reply = {"p_yes": 498, "stance": "support", "rationale": "certain"}
    async with StubServer(lambda body: reply) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry())
        with pytest.raises(ModelError) as caught:
            await model.request(make_request())
        await model.aclose()

    assert server.request_count == 2
    repair = server.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": json.dumps(reply)}
    assert "p_yes" in repair[-1]["content"] and "less than or equal to 1" in repair[-1]["content"]
    call = LlmCallData.model_validate(caught.value.call)
    assert call.attempts == 2
    assert [e.kind for e in call.errors] == ["invalid_output", "invalid_output"]
    assert call.error is not None and "after one repair" in call.error
    assert call.reply == json.dumps(reply)
    assert call.timeline == "t0" and caught.value.tick == 1


@pytest.mark.asyncio
async def test_repair_round_trip_recovers_a_malformed_reply(
    make_request: Any, fast_retry: Any, forecast_type: Any
) -> None:
    async with StubServer(fault_sequence=["malformed"]) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry())
        response = await model.request(make_request())
        await model.aclose()

    assert isinstance(response.output, forecast_type)
    assert response.call["attempts"] == 2
    assert [e["kind"] for e in response.call["errors"]] == ["invalid_output"]
    prompt_tokens = [
        max(1, sum(len(m["content"]) for m in r.body["messages"]) // 4) for r in server.requests
    ]
    assert response.call["usage"]["input_tokens"] == sum(prompt_tokens)


@pytest.mark.asyncio
async def test_truncated_reply_repair_mentions_the_token_limit(
    make_request: Any, fast_retry: Any
) -> None:
    async with StubServer(fault_sequence=["truncated"]) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry())
        response = await model.request(make_request())
        await model.aclose()

    assert response.call["finish_reason"] == "stop"
    assert "cut off" in server.requests[1].body["messages"][-1]["content"]


@pytest.mark.asyncio
async def test_server_ignoring_the_schema_is_caught_by_validation(
    make_request: Any, fast_retry: Any
) -> None:
    async with StubServer(lambda body: "Sure! I think it is likely.") as server:
        model = OpenAIModel(server.settings(), retry=fast_retry())
        with pytest.raises(ModelError) as caught:
            await model.request(make_request())
        await model.aclose()
    assert caught.value.call["error"].startswith("invalid output")
    assert server.request_count == 2


@pytest.mark.asyncio
async def test_non_retryable_client_error_fails_at_once(make_request: Any, fast_retry: Any) -> None:
    async with StubServer() as server:
        settings = server.settings()
        bad = type(settings)(settings.route, settings.base_url.removesuffix("/v1") + "/nope", "k")
        model = OpenAIModel(bad, retry=fast_retry())
        with pytest.raises(ModelError) as caught:
            await model.request(make_request())
        await model.aclose()
    call = caught.value.call
    assert call["attempts"] == 1
    assert call["errors"][0]["kind"] == "client_error" and call["errors"][0]["status"] == 404


@pytest.mark.asyncio
async def test_reasoning_model_parameters_are_adapted_once_per_route(
    make_request: Any, fast_retry: Any, forecast_type: Any
) -> None:
    async with StubServer(faults=Faults(reasoning_model=True)) as server:
        model = OpenAIModel(server.settings("stub/o4-mini"), retry=fast_retry())
        first = await model.request(make_request(index=0))
        second = await model.request(make_request(index=1))
        await model.aclose()

    assert isinstance(first.output, forecast_type)
    assert [e["kind"] for e in first.call["errors"]] == ["param_rejected", "param_rejected"]
    assert first.call["attempts"] == 3 and first.call["temperature"] == 0.2
    assert second.call["attempts"] == 1
    last = server.requests[-1].body
    assert last["max_completion_tokens"] == 256
    assert "max_tokens" not in last and "temperature" not in last
