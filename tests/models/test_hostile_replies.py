"""Replies a broken or hostile server sends: a stream that stops before its end is a cut
stream (retried, charged as one), a reply without usage is charged its reservation, every
string the server sends is redacted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.models.hostile import FORECAST, USAGE, Hostile, Raw, chunk, sse
from worldsim.domain.errors import BudgetExhausted, RouteFailed
from worldsim.models import Budget, OpenAIModel, Price, PriceTable
from worldsim.models.call import Usage

PRICES = PriceTable({"test-model": Price(input=0.15, output=0.60)})
TEXT = json.dumps(FORECAST)


@pytest.mark.asyncio
async def test_a_stream_ending_without_finish_reason_or_done_is_cut_and_retried(
    make_request: Any, fast_retry: Any
) -> None:
    cut = sse(chunk(TEXT[:20]), chunk(TEXT[20:]), done=False)
    whole = sse(chunk(TEXT), chunk(finish="stop"), USAGE)
    budget = Budget(1.0)
    with Hostile([cut, whole]) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), prices=PRICES, budget=budget)
        response = await model.request(make_request())
        await model.aclose()
    call = response.call
    assert server.count == 2 and call["attempts"] == 2
    assert [e["kind"] for e in call["errors"]] == ["connection"]
    assert "finish_reason" in call["errors"][0]["message"]
    reply_cost = PRICES.cost(("acme/test-model", "test-model", "test-model"), _usage(10, 5))
    assert call["cost_usd"] > reply_cost  # the cut attempt was charged its reservation
    assert budget.spent_usd == pytest.approx(call["cost_usd"])


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [True, False])
async def test_a_reply_without_usage_is_charged_its_reservation(
    make_request: Any, fast_retry: Any, stream: bool
) -> None:
    whole = {
        "id": "c1",
        "model": "test-model",
        "choices": [{"index": 0, "message": {"content": TEXT}, "finish_reason": "stop"}],
    }
    answer = sse(chunk(TEXT), chunk(finish="stop")) if stream else Raw(json.dumps(whole).encode())
    budget = Budget(1.0)
    with Hostile([answer]) as server:
        model = OpenAIModel(
            server.settings(), retry=fast_retry(), prices=PRICES, budget=budget, stream=stream
        )
        response = await model.request(make_request())
        await model.aclose()
    call = response.call
    anomaly = call["anomaly"]
    assert anomaly is not None and anomaly["reported_cost_usd"] == 0
    assert anomaly["reported_usage"]["output_tokens"] == 0
    assert call["cost_usd"] == pytest.approx(anomaly["reserved_usd"]) and call["cost_usd"] > 0
    assert budget.spent_usd == pytest.approx(call["cost_usd"])


@pytest.mark.asyncio
async def test_replies_without_usage_are_stopped_by_the_cap(
    make_request: Any, fast_retry: Any
) -> None:
    budget = Budget(0.0003)
    with Hostile([sse(chunk(TEXT), chunk(finish="stop"))]) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), prices=PRICES, budget=budget)
        with pytest.raises(BudgetExhausted):
            for i in range(100):
                await model.request(make_request(index=i))
        await model.aclose()
    assert 0 < server.count < 100 and budget.spent_usd <= 0.0003


def _usage(i: int, o: int) -> Usage:
    return Usage(input_tokens=i, output_tokens=o)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [True, False])
async def test_a_key_echoed_in_the_finish_reason_never_reaches_the_record(
    make_request: Any, fast_retry: Any, stream: bool
) -> None:
    key = "sk-hostile-secret-key"
    whole = {
        "id": "c1",
        "model": "test-model",
        "choices": [{"index": 0, "message": {"content": TEXT}, "finish_reason": f"stop {key}"}],
        "usage": USAGE["usage"],
    }
    answer = (
        sse(chunk(TEXT), chunk(finish=f"stop {key}"), USAGE)
        if stream
        else Raw(json.dumps(whole).encode())
    )
    with Hostile([answer]) as server:
        model = OpenAIModel(server.settings(key), retry=fast_retry(), stream=stream)
        response = await model.request(make_request())
        await model.aclose()
    assert response.call["finish_reason"].startswith("stop")
    assert key not in json.dumps(response.call)


@pytest.mark.asyncio
async def test_an_error_event_mid_stream_is_retried_as_a_server_error(
    make_request: Any, fast_retry: Any
) -> None:
    broken = sse(chunk(TEXT[:10]), {"error": {"type": "server_error", "message": "boom"}})
    whole = sse(chunk(TEXT), chunk(finish="stop"), USAGE)
    with Hostile([broken, whole]) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry())
        response = await model.request(make_request())
        await model.aclose()
    assert [e["kind"] for e in response.call["errors"]] == ["server_error"]


@pytest.mark.asyncio
async def test_an_html_page_with_status_200_is_said_not_to_be_json(
    make_request: Any, fast_retry: Any
) -> None:
    page = Raw(b"<html><body>Bad gateway</body></html>", headers=(("Content-Type", "text/html"),))
    with Hostile([page]) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(max_attempts=2), stream=False)
        with pytest.raises(RouteFailed, match="reply was not JSON"):
            await model.request(make_request())
        await model.aclose()
