"""The cost cap against a server that over-reports usage: a reply reporting more than its
request could cost is charged its reservation, recorded as a provider anomaly, and stops the run
at once (resumable); no later call on that route is sent under the same budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import DEMO_CARD, run_on_stub
from worldsim.domain.cards import load_card
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.errors import ProviderAnomaly
from worldsim.domain.policy import load_policy
from worldsim.models import Budget, OpenAIModel, Price, PriceTable
from worldsim.sim.resume import recorded_spend
from worldsim.sim.resuming import resume_run
from worldsim.sim.session import run_card
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace

PRICES = PriceTable({"test-model": Price(input=0.15, output=0.60)})
LIE = 10**7
"""Tokens in and out a lying reply reports: $7.50 at these prices, for a call that can cost
a fraction of a cent."""


@pytest.mark.asyncio
async def test_an_over_reported_reply_is_charged_its_reservation_and_recorded_as_an_anomaly(
    make_request: Any, fast_retry: Any
) -> None:
    budget = Budget(0.05)
    async with StubServer(over_report=LIE, over_report_from=1) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), prices=PRICES, budget=budget)
        honest = await model.request(make_request(index=0))
        with pytest.raises(ProviderAnomaly) as caught:
            await model.request(make_request(index=1, tick=2))
        # the route is distrusted: the next call is refused before anything is sent
        with pytest.raises(ProviderAnomaly) as refused:
            await model.request(make_request(index=2))
        await model.aclose()
    assert server.request_count == 2
    error = caught.value
    assert error.tick == 2 and "stub/test-model" in str(error)
    assert "$7.5000" in str(error) and "excess $7.49" in str(error)
    call = error.call
    anomaly = call["anomaly"]
    assert anomaly["reported_usage"]["input_tokens"] == LIE
    assert anomaly["reported_usage"]["output_tokens"] == LIE
    assert anomaly["reported_cost_usd"] == pytest.approx(7.5)
    reserved = anomaly["reserved_usd"]
    assert 0 < reserved < 0.01
    assert call["cost_usd"] == pytest.approx(reserved)  # charged what it reserved
    assert call["usage"]["input_tokens"] == LIE and call["error"] == str(error.message)
    spent = honest.call["cost_usd"] + reserved
    assert budget.spent_usd == pytest.approx(spent) and budget.spent_usd <= 0.05
    assert refused.value.call == {} and refused.value.message == error.message


@pytest.mark.asyncio
async def test_a_reply_costing_exactly_its_reservation_is_no_anomaly(
    make_request: Any, fast_retry: Any
) -> None:
    from worldsim.testing import worst_case_usage

    budget = Budget(1.0)
    async with StubServer(usage=worst_case_usage) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(), prices=PRICES, budget=budget)
        for i in range(3):
            response = await model.request(make_request(index=i))
            assert response.call["anomaly"] is None
        await model.aclose()
    assert not budget.distrusted


def _config(cap: float) -> RunConfig:
    models = ModelConfig(model="stub/test-model", max_cost_usd=cap, max_connections=1)
    card = load_card(DEMO_CARD)
    return RunConfig(card=card, policy=load_policy("branching"), seed=2, ticks=3).model_copy(
        update={"models": models}
    )


def _prices(folder: Path) -> Path:
    path = folder / "prices.yaml"
    path.write_text("models:\n  test-model: {input: 0.15, output: 0.60}\n")
    return path


def test_a_run_stops_at_the_first_lie_within_its_cap_and_resumes(tmp_path: Path) -> None:
    """A run capped at $0.05 stops at the lying reply and sends nothing after it; its trace
    ends resumable with the anomaly on the call and a spend within the cap (the reservation);
    a resume against an honest server finishes it within the cap."""
    prices = _prices(tmp_path)
    config = _config(0.05)
    config = config.model_copy(
        update={"models": config.models.model_copy(update={"prices": prices})}
    )
    trace = tmp_path / "merger-review__branching__stub-test-model__ticks3__s2.jsonl"
    # one connection: the lying reply is the last request the run sends
    with StubServer(seed=3, content_by_request=True, over_report=LIE, over_report_from=2) as s:
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": s.base_url}
        with pytest.raises(ProviderAnomaly):
            anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ=env))
        assert s.request_count == 3
    stopped = read_trace(trace)
    assert stopped.terminal is not None and stopped.terminal.type == "run_failed"
    assert stopped.terminal.data.resumable and stopped.terminal.data.kind == "ProviderAnomaly"
    assert "excess $" in stopped.terminal.data.error
    calls = stopped.of_type("llm_call")
    lied = [c.data for c in calls if c.data.anomaly is not None]
    assert len(lied) == 1 and lied[0].anomaly is not None
    assert lied[0].anomaly.reported_usage.output_tokens == LIE
    assert lied[0].cost_usd == pytest.approx(lied[0].anomaly.reserved_usd)
    assert recorded_spend(stopped) <= 0.05
    assert verify_trace(trace).exit_code == 3  # sound, not complete

    with StubServer(seed=3, content_by_request=True) as honest:
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": honest.base_url}
        result = anyio.run(lambda: resume_run(trace, fsync=False, environ=env))
    whole = read_trace(result.trace)
    assert whole.complete and verify_trace(trace).exit_code == 0
    assert recorded_spend(whole) <= 0.05
    # the voided tick's honest call came from the cache; the lying one was asked again
    marker = whole.first("run_resumed")
    assert marker is not None
    resumed = [line.data for line in whole.lines[marker.number :] if line.type == "llm_call"]
    assert [c.cache for c in resumed[:2]] == ["hit", "miss"]
    assert all(c.anomaly is None for c in resumed)


def test_the_command_line_says_which_route_lied_and_by_how_much(tmp_path: Path) -> None:
    prices = _prices(tmp_path)
    with StubServer(seed=3, over_report=LIE) as server:
        done = run_on_stub(
            server.base_url,
            tmp_path,
            *("--max-cost-usd", "0.05", "--prices", str(prices), "--max-connections", "1"),
        )
        assert server.request_count == 1
    assert done.returncode == 1 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "stub/test-model" in last
    assert "excess $7.49" in last and "resumable" in last
