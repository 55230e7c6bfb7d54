"""The budget: each call reserves its worst case and settles to its cost; never past the cap."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from worldsim.domain.contracts import ModelRequest, ModelResponse
from worldsim.domain.errors import BudgetExhausted
from worldsim.models import Budget, OpenAIModel, Price, PriceTable
from worldsim.models.call import Usage, output_schema_of
from worldsim.models.pricing import input_token_bound
from worldsim.testing import ScriptedModel, StubServer, worst_case_usage

# float sums of many small costs differ from the budget's running sum in the last bits
FLOAT_NOISE = 1e-9
REPLY = {"p_yes": 0.4, "stance": "neutral", "rationale": "steady"}
PRICES = PriceTable({"test-model": Price(input=20.0, output=80.0)})


def _leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in _leaves(inner)]
    return [group]


# ---------------------------------------------------------------------------- the Budget itself


@pytest.mark.asyncio
async def test_settling_charges_the_real_cost_and_gives_back_the_rest() -> None:
    budget = Budget(1.0)
    async with budget.reserve(0.8) as held:
        assert (budget.reserved_usd, budget.remaining_usd) == (0.8, pytest.approx(0.2))
        held.settle(0.3)
        assert (budget.spent_usd, budget.reserved_usd) == (0.3, 0.0)
    assert budget.remaining_usd == pytest.approx(0.7) and not budget.exhausted


@pytest.mark.asyncio
async def test_a_call_that_sends_nothing_is_released_free() -> None:
    budget = Budget(1.0)
    with pytest.raises(RuntimeError):
        async with budget.reserve(0.9):
            raise RuntimeError("no reply")
    assert (budget.spent_usd, budget.reserved_usd) == (0.0, 0.0)


@pytest.mark.asyncio
async def test_a_reservation_that_cannot_fit_is_refused_and_closes_the_budget(
    make_request: Any,
) -> None:
    budget = Budget(1.0)
    async with budget.reserve(0.6) as held:
        held.settle(0.5)
    with pytest.raises(BudgetExhausted) as caught:
        async with budget.reserve(0.6, make_request(tick=4)):
            pytest.fail("a reservation past the cap was granted")
    assert caught.value.tick == 4
    assert "budget of $1.0000 reached" in str(
        caught.value
    ) and "a higher budget (--max-cost-usd) goes on" in str(caught.value)
    # closed: not even a call that would fit starts after the refusal
    with pytest.raises(BudgetExhausted):
        async with budget.reserve(0.1):
            pytest.fail("a closed budget granted a reservation")
    assert budget.exhausted and budget.spent_usd == 0.5


@pytest.mark.asyncio
async def test_a_reservation_waits_for_outstanding_ones_rather_than_failing() -> None:
    budget = Budget(1.0)
    first_held, release_first = anyio.Event(), anyio.Event()
    order: list[str] = []

    async def first() -> None:
        async with budget.reserve(0.8) as held:
            first_held.set()
            await release_first.wait()
            order.append("first settles")
            held.settle(0.2)

    async def second() -> None:
        await first_held.wait()
        assert budget.remaining_usd == pytest.approx(0.2)
        release_first.set()  # `first` runs only once `reserve` below blocks
        async with budget.reserve(0.5) as held:
            order.append("second reserved")
            held.settle(0.5)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(second)
    assert order == ["first settles", "second reserved"]
    assert budget.spent_usd == pytest.approx(0.7) and not budget.closed


@pytest.mark.asyncio
async def test_calls_waiting_on_the_budget_are_refused_when_it_runs_out() -> None:
    """The release that leaves nothing outstanding wakes every waiter; each is refused (none
    hangs, none is merely cancelled by the first refusal), so a call that paid for earlier
    round trips can record them."""
    budget = Budget(1.0)
    holding, settle = anyio.Event(), anyio.Event()
    outcomes: list[str] = []

    async def holder() -> None:
        async with budget.reserve(0.6) as held:
            holding.set()
            await settle.wait()
            held.settle(0.6)

    async def waiter() -> None:
        await holding.wait()
        try:
            async with budget.reserve(0.5):
                outcomes.append("reserved")
        except BudgetExhausted:
            outcomes.append("refused")
            raise
        except anyio.get_cancelled_exc_class():
            outcomes.append("cancelled")
            raise

    async def release_when_both_wait() -> None:
        await holding.wait()
        while budget.waiting < 2:
            await anyio.lowlevel.checkpoint()
        settle.set()

    with pytest.raises(BaseExceptionGroup) as caught:
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            tg.start_soon(waiter)
            tg.start_soon(waiter)
            tg.start_soon(release_when_both_wait)
    assert outcomes == ["refused", "refused"]
    assert all(isinstance(leaf, BudgetExhausted) for leaf in _leaves(caught.value))


@pytest.mark.asyncio
async def test_a_zero_budget_refuses_every_call_and_spend_may_start_above_zero() -> None:
    with pytest.raises(BudgetExhausted):
        async with Budget(0.0).reserve(0.0):
            pass
    resumed = Budget(1.0, spent_usd=0.95)
    with pytest.raises(BudgetExhausted):
        async with resumed.reserve(0.06):
            pass
    async with Budget(1.0, spent_usd=0.95).reserve(0.05) as held:
        held.settle(0.05)
    assert held.cost_usd == 0.05


@pytest.mark.asyncio
async def test_a_refusal_after_the_budget_closed_says_so_and_how_it_is_raised() -> None:
    budget = Budget(1.0, raised_by="raise it where it was set")
    with pytest.raises(BudgetExhausted) as first:
        async with budget.reserve(2.0):
            pass
    with pytest.raises(BudgetExhausted) as later:  # 0.1 would fit, but the budget is closed
        async with budget.reserve(0.1):
            pass
    assert str(first.value) == (
        "budget of $1.0000 reached: spent $0.0000, the next call could cost up to $2.0000; "
        "raise it where it was set"
    )
    assert str(later.value) == (
        "budget of $1.0000 reached: spent $0.0000, an earlier call that did not fit closed it; "
        "raise it where it was set"
    )


def test_a_negative_budget_or_spend_is_a_config_error() -> None:
    from worldsim.domain.errors import ConfigError

    with pytest.raises(ConfigError, match="max_cost_usd"):
        Budget(-1.0)
    with pytest.raises(ConfigError, match="spent_usd"):
        Budget(1.0, spent_usd=-0.5)


# ------------------------------------------------- many calls reserving on one budget at once


def _worst_case(price: Price, request: ModelRequest) -> float:
    """The most ``request`` can cost: its messages, schema and ``max_tokens`` at ``price``."""
    messages = [{"role": m.role, "content": m.content} for m in request.chat()]
    prompt = {"messages": messages, "schema": output_schema_of(request)}
    return price.worst_case(input_token_bound(prompt), request.max_tokens)


async def _reserved(
    budget: Budget, price: Price, model: Any, request: ModelRequest
) -> ModelResponse:
    """A call as a route makes it: reserve its worst case, then settle to the priced usage."""
    async with budget.reserve(_worst_case(price, request), request) as held:
        response = await model.request(request)
        cost = round(price.cost(Usage.model_validate(response.call["usage"])), 10)
        held.settle(cost)
        return ModelResponse(response.output, response.text, {**response.call, "cost_usd": cost})


class _Interleaved:
    """A scripted model that yields to the event loop before answering, a drawn number of
    times per call, so that many calls are in flight at once in varied orders."""

    def __init__(self, inner: ScriptedModel, pauses: list[int]) -> None:
        self.inner = inner
        self.pauses = pauses
        self.requests: list[ModelRequest] = []

    @property
    def route(self) -> str:
        return self.inner.route

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        for _ in range(self.pauses[request.site.index % len(self.pauses)]):
            await anyio.lowlevel.checkpoint()
        return await self.inner.request(request)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cap=st.floats(0.0, 0.2),
    input_price=st.floats(0.01, 200.0),
    output_price=st.floats(0.01, 400.0),
    max_tokens=st.integers(24, 1024),
    concurrency=st.integers(1, 16),
    calls=st.integers(1, 40),
    lengths=st.lists(st.integers(0, 400), min_size=1, max_size=40),
    pauses=st.lists(st.integers(0, 5), min_size=1, max_size=16),
)
def test_concurrent_spend_never_passes_the_cap_and_no_sent_call_is_lost(
    make_request: Any,
    cap: float,
    input_price: float,
    output_price: float,
    max_tokens: int,
    concurrency: int,
    calls: int,
    lengths: list[int],
    pauses: list[int],
) -> None:
    price = Price(input=input_price, output=output_price)
    budget = Budget(cap)

    def reply(request: ModelRequest) -> dict[str, Any]:
        # a server never returns more than max_tokens: keep the reply's ~len/4 tokens under it
        room = max(0, min(400, 4 * request.max_tokens - 80))
        return {**REPLY, "rationale": "x" * min(room, lengths[request.site.index % len(lengths)])}

    inner = _Interleaved(ScriptedModel(reply), pauses)
    responses: list[ModelResponse] = []
    refused: list[ModelRequest] = []

    async def one(limiter: anyio.CapacityLimiter, i: int) -> None:
        request = dataclasses.replace(make_request(index=i), max_tokens=max_tokens)
        async with limiter:
            try:
                responses.append(await _reserved(budget, price, inner, request))
            except BudgetExhausted:
                refused.append(request)
                raise

    async def scenario() -> None:
        limiter = anyio.CapacityLimiter(concurrency)
        try:
            async with anyio.create_task_group() as tg:
                for i in range(calls):
                    tg.start_soon(one, limiter, i)
        except BaseExceptionGroup as group:
            assert all(isinstance(leaf, BudgetExhausted) for leaf in _leaves(group))

    anyio.run(scenario)
    spent = math.fsum(r.call["cost_usd"] for r in responses)
    assert spent <= cap + FLOAT_NOISE
    assert budget.spent_usd == pytest.approx(spent, abs=FLOAT_NOISE)
    # every call that reached the model was answered: none was paid for and then cancelled
    assert len(inner.requests) == len(responses)
    event("stopped by the budget" if refused else "ran to the end")
    if refused:
        assert budget.closed
        # the stop was needed: the refused call's worst case did not fit what was left
        assert _worst_case(price, refused[0]) > cap - budget.spent_usd - FLOAT_NOISE
    else:
        assert len(responses) == calls


# ------------------------------------------------------------ OpenAIModel against a priced stub


@pytest.mark.asyncio
async def test_a_route_never_sends_a_call_its_budget_cannot_hold(
    make_request: Any, fast_retry: Any
) -> None:
    budget = Budget(0.2)
    async with StubServer(usage=worst_case_usage) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), prices=PRICES, budget=budget)
        records: list[dict[str, Any]] = []
        with pytest.raises(BudgetExhausted) as caught:
            for i in range(100):
                records.append(dict((await model.request(make_request(index=i, tick=3))).call))
        await model.aclose()
    assert records and server.request_count == len(records)  # the refused call was not sent
    assert caught.value.tick == 3 and caught.value.call == {}
    total = math.fsum(r["cost_usd"] for r in records)
    assert total <= 0.2 + FLOAT_NOISE
    assert budget.spent_usd == pytest.approx(total, abs=FLOAT_NOISE)
    # the usage was the worst case: each call cost exactly what it reserved
    worst = PRICES.prices["test-model"].worst_case(input_token_bound(server.requests[0].body), 256)
    assert records[0]["cost_usd"] == pytest.approx(worst)
    assert 0.2 - total < worst * 1.5  # it stopped because the next call could not fit


@pytest.mark.asyncio
async def test_concurrent_calls_on_a_route_stay_within_the_cap_and_none_is_lost(
    make_request: Any, fast_retry: Any
) -> None:
    budget = Budget(0.5)
    records: list[dict[str, Any]] = []
    async with StubServer(usage=worst_case_usage, latency_s=0.01) as server:
        model = OpenAIModel(
            server.settings(),
            retry=fast_retry(),
            prices=PRICES,
            budget=budget,
            limiter=anyio.CapacityLimiter(6),
        )

        async def one(i: int) -> None:
            records.append(dict((await model.request(make_request(index=i))).call))

        with pytest.raises(BaseExceptionGroup) as caught:
            async with anyio.create_task_group() as tg:
                for i in range(60):
                    tg.start_soon(one, i)
        await model.aclose()
    assert all(isinstance(leaf, BudgetExhausted) for leaf in _leaves(caught.value))
    assert math.fsum(r["cost_usd"] for r in records) <= 0.5 + FLOAT_NOISE
    assert server.max_concurrency > 1
    assert server.request_count == len(records)  # every call sent was answered and recorded


@pytest.mark.asyncio
async def test_a_repair_the_budget_cannot_hold_ends_the_call_with_its_cost_recorded(
    make_request: Any, fast_retry: Any
) -> None:
    replies = iter([REPLY, {**REPLY, "p_yes": 7}, REPLY])

    def script(body: dict[str, Any]) -> dict[str, Any]:
        return next(replies)

    async with StubServer(script, usage=worst_case_usage) as server:
        # a first call learns what one round trip of this request costs at worst
        probe = OpenAIModel(server.settings(), retry=fast_retry(), prices=PRICES)
        one_round = (await probe.request(make_request())).call["cost_usd"]
        await probe.aclose()
        # room for the first round trip; the repair (a longer prompt) cannot fit
        budget = Budget(one_round * 1.5)
        model = OpenAIModel(server.settings(), retry=fast_retry(), prices=PRICES, budget=budget)
        with pytest.raises(BudgetExhausted) as caught:
            await model.request(make_request())
        await model.aclose()
    call = caught.value.call
    assert server.request_count == 2  # the probe's call and this call's first round trip
    assert call["cost_usd"] == pytest.approx(one_round) and call["attempts"] == 1
    assert "budget" in call["error"] and call["errors"][0]["kind"] == "invalid_output"
    assert budget.spent_usd == pytest.approx(one_round)


def test_the_input_bound_counts_every_byte_of_the_body() -> None:
    body = {"messages": [{"role": "user", "content": "héllo"}], "max_tokens": 5}
    assert input_token_bound(body) == len(json.dumps(body).encode("utf-8"))
    assert input_token_bound(body) >= len("héllo".encode())


@pytest.mark.asyncio
async def test_a_cut_stream_and_its_retry_never_pass_the_cap(
    make_request: Any, fast_retry: Any
) -> None:
    """The first attempt streams, stalls and times out: it is charged its whole reservation.
    The retry must reserve afresh; when that does not fit, it is not sent."""
    request = make_request()
    async with StubServer(usage=worst_case_usage) as probe:
        model = OpenAIModel(probe.settings(), retry=fast_retry(), prices=PRICES, budget=Budget(10))
        first = await model.request(request)
        await model.aclose()
    bound = first.call["cost_usd"]  # a whole reply costs its reservation here
    budget = Budget(1.5 * bound)
    async with StubServer(
        usage=worst_case_usage, stall_after_chunks=2, stall_first=1, chunk_chars=2
    ) as server:
        model = OpenAIModel(
            server.settings(),
            retry=fast_retry(timeout_s=0.3, max_attempts=3),
            prices=PRICES,
            budget=budget,
        )
        with pytest.raises(BudgetExhausted) as caught:
            await model.request(request)
        await model.aclose()
    assert server.request_count == 1  # the retry did not fit and was not sent
    assert budget.spent_usd == pytest.approx(bound)  # the cut stream: its reservation
    assert budget.spent_usd <= budget.max_usd
    assert caught.value.call["cost_usd"] == pytest.approx(bound)
