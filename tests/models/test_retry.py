"""Retries: faults recovered and recorded, Retry-After honoured, attempts bounded."""

from __future__ import annotations

import email.utils
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from worldsim.domain.config import RetrySettings
from worldsim.domain.errors import ModelError
from worldsim.models import (
    LlmCallData,
    OpenAIModel,
    RetryPolicy,
    RouteLimiters,
    parse_retry_after,
)
from worldsim.testing import Faults, StubServer


def test_parse_retry_after_reads_seconds_dates_and_milliseconds() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(12.0)
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


_SECONDS = st.floats(min_value=0.001, max_value=3600.0, allow_nan=False)


@given(
    attempts=st.integers(min_value=1, max_value=100),
    timeout=_SECONDS,
    initial=_SECONDS,
    cap=_SECONDS,
    jitter=_SECONDS,
    after=_SECONDS,
)
def test_a_run_configs_retry_block_becomes_the_policy_field_for_field(
    attempts: int, timeout: float, initial: float, cap: float, jitter: float, after: float
) -> None:
    settings = RetrySettings(
        max_attempts=attempts,
        timeout_s=timeout,
        backoff_initial_s=initial,
        backoff_max_s=cap,
        jitter_s=jitter,
        retry_after_cap_s=after,
    )
    policy = RetryPolicy.from_settings(settings)
    assert {name: getattr(policy, name) for name in RetrySettings.model_fields} == (
        settings.model_dump()
    )


def test_without_a_retry_block_the_policy_has_the_run_configs_defaults() -> None:
    defaults = RetrySettings().model_dump()
    for policy in (RetryPolicy(), RetryPolicy.from_settings(None)):
        assert {name: getattr(policy, name) for name in defaults} == defaults


@pytest.mark.asyncio
async def test_batch_completes_through_rate_limits_errors_timeouts_and_bad_replies(
    make_request: Any, fast_retry: Any, forecast_type: Any
) -> None:
    faults = Faults(
        rate_limit=0.20, server_error=0.05, timeout=0.05, malformed=0.05, timeout_sleep_s=6.0
    )
    calls = 40
    policy = fast_retry(max_attempts=10, timeout_s=3.0)  # a slow machine stays under it
    results: list[dict[str, Any]] = []
    failures: list[ModelError] = []
    async with StubServer(faults=faults, seed=11) as server:
        model = OpenAIModel(
            server.settings(), retry=policy, limiter=RouteLimiters(8).get("stub/test-model")
        )

        async def one(i: int) -> None:
            try:
                response = await model.request(make_request(index=i))
            except ModelError as exc:
                failures.append(exc)
            else:
                assert isinstance(response.output, forecast_type)
                results.append(dict(response.call))

        async with anyio.create_task_group() as tg:
            for i in range(calls):
                tg.start_soon(one, i)
        await model.aclose()

    # a reply can only fail for good if both it and its repair came back malformed
    assert len(results) + len(failures) == calls
    assert len(failures) <= 2
    records = [LlmCallData.model_validate(c) for c in results] + [
        LlmCallData.model_validate(f.call) for f in failures
    ]
    kinds = [e.kind for r in records for e in r.errors]
    seen = server.fault_counts
    assert seen["rate_limit"] > 0 and seen["server_error"] > 0 and seen["timeout"] > 0
    assert kinds.count("rate_limit") == seen["rate_limit"]
    assert kinds.count("server_error") == seen["server_error"]
    assert kinds.count("timeout") == seen["timeout"]
    assert kinds.count("invalid_output") == seen["malformed"]
    assert sum(r.attempts for r in records) == server.request_count
    for r in records:
        assert 1 <= r.attempts <= 10
        assert r.attempts == len(r.errors) + (1 if r.error is None else 0)
        assert sorted(e.attempt for e in r.errors) == [e.attempt for e in r.errors]
    for e in (e for r in records for e in r.errors if e.kind == "rate_limit"):
        assert e.status == 429 and e.wait_s is not None


@pytest.mark.asyncio
async def test_retry_after_header_sets_the_wait(
    make_request: Any, fast_retry: Any, sleeps: Any
) -> None:
    faults = Faults(retry_after="7")
    async with StubServer(faults=faults, fault_sequence=["rate_limit", "rate_limit"]) as server:
        policy = fast_retry(retry_after_cap_s=30.0, sleep=sleeps)
        model = OpenAIModel(server.settings(), retry=policy)
        response = await model.request(make_request())
        await model.aclose()

    assert sleeps.waits == [7.0, 7.0]
    assert [e["wait_s"] for e in response.call["errors"]] == [7.0, 7.0]
    assert response.call["attempts"] == 3


@pytest.mark.asyncio
async def test_retry_after_ms_and_cap(make_request: Any, fast_retry: Any, sleeps: Any) -> None:
    faults = Faults(retry_after="600", retry_after_ms="1500")
    async with StubServer(faults=faults, fault_sequence=["rate_limit"]) as server:
        model = OpenAIModel(
            server.settings(), retry=fast_retry(retry_after_cap_s=30.0, sleep=sleeps)
        )
        await model.request(make_request())
        await model.aclose()
    assert sleeps.waits == [1.5]

    faults = Faults(retry_after="600")
    sleeps.waits.clear()
    async with StubServer(faults=faults, fault_sequence=["rate_limit"]) as server:
        model = OpenAIModel(
            server.settings(), retry=fast_retry(retry_after_cap_s=20.0, sleep=sleeps)
        )
        await model.request(make_request())
        await model.aclose()
    assert sleeps.waits == [20.0]


@pytest.mark.asyncio
async def test_backoff_grows_without_retry_after(
    make_request: Any, fast_retry: Any, sleeps: Any
) -> None:
    policy = fast_retry(backoff_initial_s=1.0, backoff_max_s=100.0, jitter_s=0.5, sleep=sleeps)
    async with StubServer(fault_sequence=["server_error"] * 3) as server:
        model = OpenAIModel(server.settings(), retry=policy)
        await model.request(make_request())
        await model.aclose()
    assert len(sleeps.waits) == 3
    for n, wait in enumerate(sleeps.waits):
        assert 2**n <= wait <= 2**n + 0.5


@pytest.mark.asyncio
async def test_attempts_are_bounded_and_the_failure_is_recorded(
    make_request: Any, fast_retry: Any
) -> None:
    async with StubServer(faults=Faults(server_error=1.0)) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(max_attempts=4))
        with pytest.raises(ModelError) as caught:
            await model.request(make_request())
        await model.aclose()
    assert server.request_count == 4
    call = caught.value.call
    assert call["attempts"] == 4
    assert [e["kind"] for e in call["errors"]] == ["server_error"] * 4
    assert [e["attempt"] for e in call["errors"]] == [1, 2, 3, 4]
    assert "gave up after 4 attempts" in call["error"]


_ANSWER = {"p_yes": 0.3, "stance": "neutral", "rationale": "r"}


@pytest.mark.parametrize(
    ("status", "should_retry", "retried"),
    [
        (409, None, True),  # a lock timeout: the openai client retries it
        (503, "false", False),  # the server's x-should-retry wins over the status
        (400, "true", True),
        (400, None, False),
    ],
)
@pytest.mark.asyncio
async def test_a_status_is_retried_as_the_openai_client_retries_it(
    make_request: Any, fast_retry: Any, status: int, should_retry: str | None, retried: bool
) -> None:
    from worldsim.testing import StubReply

    headers = {} if should_retry is None else {"x-should-retry": should_retry}
    answers: list[Any] = [
        StubReply(status, {"error": {"message": "busy", "type": "x", "code": None}}, headers)
    ]

    def script(body: dict[str, Any]) -> Any:
        return answers.pop(0) if answers else _ANSWER

    async with StubServer(script=script) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(max_attempts=3))
        if retried:
            response = await model.request(make_request())
            assert response.call["attempts"] == 2
            assert response.call["errors"][0]["status"] == status
        else:
            with pytest.raises(ModelError) as caught:
                await model.request(make_request())
            assert caught.value.call["attempts"] == 1
        await model.aclose()
    assert server.request_count == (2 if retried else 1)


@pytest.mark.asyncio
async def test_timeouts_are_retried(make_request: Any, fast_retry: Any) -> None:
    faults = Faults(timeout_sleep_s=1.5)
    async with StubServer(faults=faults, fault_sequence=["timeout"]) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry(timeout_s=0.6))
        response = await model.request(make_request())
        await model.aclose()
    assert [e["kind"] for e in response.call["errors"]] == ["timeout"]
    assert response.call["attempts"] == 2


@pytest.mark.asyncio
async def test_a_hung_attempt_is_cut_at_its_timeout_and_retried_until_the_attempts_run_out() -> (
    None
):
    from worldsim.models.call import CallErrorEntry
    from worldsim.models.retry import Attempt, RetryPolicy, TransientError, call_with_retries

    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(max_attempts=4, timeout_s=0.2, jitter_s=0.0, sleep=record)
    calls: list[int] = []

    async def flaky(attempt: Attempt) -> str:
        calls.append(attempt.number)
        if attempt.number == 1:
            await anyio.sleep(10)  # hangs: cut after timeout_s without progress
        if attempt.number == 2:
            raise TransientError(CallErrorEntry(attempt=2, kind="server_error", message="busy"))
        return "answer"

    errors: list[CallErrorEntry] = []
    assert await call_with_retries(flaky, policy, errors.append) == "answer"
    assert calls == [1, 2, 3] and len(waits) == 2
    assert [e.kind for e in errors] == ["timeout", "server_error"]

    async def hopeless(attempt: Attempt) -> str:
        raise TransientError(
            CallErrorEntry(attempt=attempt.number, kind="server_error", message="busy")
        )

    errors.clear()
    with pytest.raises(TransientError):
        await call_with_retries(hopeless, policy, errors.append)
    assert [e.attempt for e in errors] == [1, 2, 3, 4]


@pytest.mark.asyncio
async def test_progress_reported_as_the_timeout_lands_still_ends_the_attempt_as_a_timeout() -> None:
    """A chunk that arrives while the no-progress cancellation is on its way must not move the
    limit past it: the attempt is a timeout and is retried, never an attempt that "succeeded"
    with nothing (its cancel scope swallowing its own cancellation)."""
    from worldsim.models.call import CallErrorEntry
    from worldsim.models.retry import Attempt, RetryPolicy, call_with_retries

    async def no_wait(seconds: float) -> None:
        return None

    policy = RetryPolicy(max_attempts=3, timeout_s=0.05, jitter_s=0.0, sleep=no_wait)

    async def late_chunk(attempt: Attempt) -> str:
        if attempt.number == 1:
            try:
                await anyio.sleep(10)
            except anyio.get_cancelled_exc_class():
                attempt.progress()  # a chunk read just as the limit passed
                raise
        return "answer"

    errors: list[CallErrorEntry] = []
    assert await call_with_retries(late_chunk, policy, errors.append) == "answer"
    assert [(e.attempt, e.kind) for e in errors] == [(1, "timeout")]
