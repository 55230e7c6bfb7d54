"""The ``tools`` output mode: the reply is the arguments of a forced ``answer`` function call;
with the gateway's tools offered too, the model may use them first; a server without function
calling moves the route to the next mode in its order."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import DEMO_CARD
from worldsim.domain.cards import load_card
from worldsim.domain.config import ModelConfig, RetrySettings, RouteOptions, RunConfig
from worldsim.domain.errors import ModelError
from worldsim.domain.policy import load_policy
from worldsim.models import OpenAIModel
from worldsim.models.call import LlmCallData
from worldsim.models.messages import ANSWER_TOOL
from worldsim.models.recorded import RecordedModel, RecordedReplies
from worldsim.sim.session import run_card
from worldsim.testing import Faults, StubServer
from worldsim.trace.reader import read_trace


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [True, False])
async def test_a_tools_route_answers_through_the_answer_function(
    make_request: Any, fast_retry: Any, stream: bool
) -> None:
    async with StubServer(seed=3) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), modes=("tools",), stream=stream)
        response = await model.request(make_request())
        await model.aclose()
    body = server.requests[0].body
    (tool,) = body["tools"]
    assert tool["function"]["name"] == ANSWER_TOOL
    assert tool["function"]["parameters"]["properties"].keys() == {"p_yes", "stance", "rationale"}
    assert body["tool_choice"] == {"type": "function", "function": {"name": ANSWER_TOOL}}
    assert "response_format" not in body
    assert 0 <= response.output.p_yes <= 1  # type: ignore[attr-defined]
    assert response.call["output_mode"] == "tools"
    assert json.loads(response.text) == response.output.model_dump(mode="json")


@pytest.mark.asyncio
async def test_gateway_tools_come_first_and_the_answer_ends_the_call(
    make_request: Any, fast_retry: Any
) -> None:
    used: list[str] = []

    async def handler(name: str, arguments: str) -> str:
        used.append(name)
        return json.dumps({"hits": []})

    search = {
        "type": "function",
        "function": {"name": "search_evidence", "parameters": {"type": "object"}},
    }
    request = dataclasses.replace(make_request(), tools=(search,), tool_handler=handler)
    async with StubServer(seed=3) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), modes=("tools",))
        response = await model.request(request)
        await model.aclose()
    body = server.requests[0].body
    assert [t["function"]["name"] for t in body["tools"]] == ["search_evidence", ANSWER_TOOL]
    assert body["tool_choice"] == "required"
    assert used == []  # the answer was called, so no gateway tool ran
    assert response.call["output_mode"] == "tools"


@pytest.mark.asyncio
async def test_a_server_without_function_calling_moves_the_route_on(
    make_request: Any, fast_retry: Any
) -> None:
    async with StubServer(seed=3, faults=Faults(reject_tools=True)) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), modes=("tools", "json_schema"))
        response = await model.request(make_request())
        await model.aclose()
        with pytest.raises(Exception, match="rejected the request format"):
            forced = OpenAIModel(server.settings(), retry=fast_retry(), modes=("tools",))
            try:
                await forced.request(make_request())
            finally:
                await forced.aclose()
    assert response.call["output_mode"] == "json_schema"
    assert [e["kind"] for e in response.call["errors"]] == ["format_rejected"]


def test_a_run_on_a_tools_route_records_the_mode(tmp_path: Path) -> None:
    config = RunConfig(
        card=load_card(DEMO_CARD),
        policy=load_policy("no_branch"),
        seed=1,
        ticks=2,
        models=ModelConfig(
            model="stub/test-model",
            retry=RetrySettings(max_attempts=3, timeout_s=5),
            routes={"stub/test-model": RouteOptions(output_mode="tools")},
        ),
    )
    with StubServer(seed=4) as server:
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        result = anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ=env))
    calls = list(read_trace(result.trace).of_type("llm_call"))
    assert calls and {c.data.output_mode for c in calls} == {"tools"}
    assert all(c.data.error is None for c in calls)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [True, False])
async def test_the_record_keeps_the_answer_s_arguments_as_its_reply(
    make_request: Any, fast_retry: Any, stream: bool
) -> None:
    request = make_request()
    async with StubServer(seed=3) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), modes=("tools",), stream=stream)
        response = await model.request(request)
        await model.aclose()
    call = LlmCallData.model_validate(response.call)
    assert call.reply == response.text and json.loads(call.reply)["p_yes"] is not None
    # what a resume or a replay does with the record: answered from it, not asked again
    again = await RecordedModel(_Unreachable(), RecordedReplies([call])).request(request)
    assert again.output == response.output and again.call["cache"] == "hit"


@pytest.mark.asyncio
async def test_an_invalid_answer_s_arguments_are_kept_as_the_reply(
    make_request: Any, fast_retry: Any
) -> None:
    bad = '{"p_yes": 2, "stance": "support", "rationale": "r"}'
    async with StubServer(lambda body: bad) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), modes=("tools",))
        with pytest.raises(ModelError) as caught:
            await model.request(make_request())
        await model.aclose()
    assert caught.value.call["reply"] == bad


class _Unreachable:
    route = "stub/test-model"

    async def request(self, request: Any) -> Any:
        raise AssertionError("asked again")
