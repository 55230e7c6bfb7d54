"""Runs with model routes against a stub OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import random
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from worldsim.domain.cards import Card
from worldsim.domain.config import ModelConfig, RetrySettings, RunConfig
from worldsim.domain.errors import BudgetExhausted, ConfigError, RouteFailed
from worldsim.domain.policy import load_policy
from worldsim.models.call import CANCELLED
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult
from worldsim.testing import Faults, StubServer, fake_value, worst_case_usage
from worldsim.testing.stub_wire import requested_schema
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash, verify_trace

KEY = "sk-planted-secret-0123456789abcdef"
FAST = RetrySettings(
    max_attempts=6,
    timeout_s=0.5,
    backoff_initial_s=0.001,
    backoff_max_s=0.01,
    jitter_s=0.001,
    retry_after_cap_s=0.01,
)


def _env(server: StubServer) -> dict[str, str]:
    return {"STUB_API_KEY": KEY, "STUB_BASE_URL": server.base_url}


def _run(
    card: Card, server: StubServer, out: Path, *, seed: int = 3, ticks: int = 3, **models: Any
) -> RunResult:
    config = RunConfig(
        card=card,
        policy=load_policy("branching"),
        seed=seed,
        ticks=ticks,
        models=ModelConfig(
            **{
                "model": "stub/test-model",
                "retry": FAST,
                "cache_dir": out / "cache",
                **models,
            }
        ),
    )
    return anyio.run(
        lambda: run_card(config, out, fsync=False, overwrite=True, environ=_env(server))
    )


def test_schema_valid_but_arbitrary_replies_still_complete(demo_card: Card, tmp_path: Path) -> None:
    with StubServer(seed=1) as server:
        result = _run(demo_card, server, tmp_path)
        assert server.request_count > 0
    verdict = verify_trace(result.trace)
    assert verdict.exit_code == 0
    trace = read_trace(result.trace)
    calls = [line.record.data for line in trace.of_type("llm_call")]
    assert {c.role for c in calls} >= {"initializer", "actor", "cohort", "governance", "reporter"}
    for c in calls:
        assert c.provider == "stub" and c.requested_model == "test-model"
        assert c.base_url_host.startswith("127.0.0.1:")
        assert c.response_id and len(c.request_hash) == 64 and len(c.prompt_version) == 12
        assert c.cache == "miss" and c.attempts >= 1 and c.output_mode
    started = trace.started
    assert started.routes["governance"] == "stub/test-model"
    assert set(started.prompt_versions.values()) != {"offline"}


def test_faults_are_retried_and_recorded_and_nothing_is_lost(
    demo_card: Card, tmp_path: Path
) -> None:
    faults = Faults(
        rate_limit=0.2,
        server_error=0.05,
        timeout=0.05,
        malformed=0.05,
        retry_after="0",
        timeout_sleep_s=0.8,
    )
    calls: list[Any] = []
    with StubServer(faults=faults, seed=7) as server:
        for seed in range(8):
            result = _run(demo_card, server, tmp_path / str(seed), seed=seed, ticks=3)
            assert verify_trace(result.trace).exit_code == 0
            calls += [line.record.data for line in read_trace(result.trace).of_type("llm_call")]
        injected = sum(server.fault_counts.values())
        requests = server.request_count
    assert injected >= 10
    retried = [e for c in calls for e in c.errors]
    # every HTTP attempt is accounted for; only one that ended without an answer (timed out,
    # or its connection failed) may have been cut before the server read its request
    unanswered = sum(1 for e in retried if e.kind in ("timeout", "connection"))
    assert requests <= sum(c.attempts for c in calls) <= requests + unanswered
    assert retried, "every fault and retry is in the trace"
    # bounded: max_attempts per request, and the one repair round trip gets its own
    assert all(c.attempts <= 2 * FAST.max_attempts for c in calls)
    kinds = {e.kind for e in retried}
    assert "rate_limit" in kinds and "server_error" in kinds
    assert kinds <= {"rate_limit", "server_error", "timeout", "invalid_output", "bad_response"}
    # every injected fault shows up in the trace as a recorded error
    assert len(retried) >= injected


def test_a_second_run_with_the_cache_calls_nothing(demo_card: Card, tmp_path: Path) -> None:
    with StubServer(seed=2) as server:
        first = _run(demo_card, server, tmp_path / "a", seed=5)
        calls_first = server.request_count
        cache = tmp_path / "a" / "cache"
        config = RunConfig(
            card=demo_card,
            policy=load_policy("branching"),
            seed=5,
            ticks=3,
            models=ModelConfig(
                model="stub/test-model",
                retry=FAST,
                cache_dir=cache,
                replay_strict=True,
            ),
        )
        second = anyio.run(
            lambda: run_card(config, tmp_path / "b", fsync=False, environ=_env(server))
        )
        assert server.request_count == calls_first
    a, b = read_trace(first.trace), read_trace(second.trace)
    assert canonical_hash(a) == canonical_hash(b)
    assert all(line.record.data.cache == "hit" for line in b.of_type("llm_call"))


def test_the_api_key_never_reaches_trace_or_cache(
    demo_card: Card, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with StubServer(seed=4) as server:
        result = _run(demo_card, server, tmp_path, ticks=2)
        assert any(KEY in r.headers.get("authorization", "") for r in server.requests)
    assert KEY not in result.trace.read_text(encoding="utf-8")
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    captured = capfd.readouterr()
    assert KEY not in captured.out and KEY not in captured.err


def test_the_budget_stops_the_run_cleanly(demo_card: Card, tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  test-model: {input: 1000.0, output: 1000.0}\n")
    with StubServer(seed=5) as server, pytest.raises(BudgetExhausted):
        _run(demo_card, server, tmp_path, ticks=2, max_cost_usd=0.5, prices=prices)
    trace = read_trace(tmp_path / "merger-review__branching__stub-test-model__ticks2__s3.jsonl")
    assert trace.terminal is not None and trace.terminal.type == "run_failed"
    assert trace.terminal.data.resumable and trace.terminal.data.kind == "BudgetExhausted"


def test_calls_in_flight_when_a_route_fails_are_traced_and_the_run_resumes(
    demo_card: Card, tmp_path: Path
) -> None:
    # the initializer is answered; two of the first tick's calls are held while a third fails
    # for good (one attempt), which stops the run with the held ones in flight
    gate = threading.Event()
    numbers = itertools.count()

    def script(body: dict[str, Any]) -> str:
        number = next(numbers)
        if number in (1, 2):
            gate.wait(30)
        return json.dumps(fake_value(requested_schema(body) or {}, random.Random(number)))

    once = FAST.model_copy(update={"max_attempts": 1, "timeout_s": 30.0})
    with StubServer(script, seed=6, fault_sequence=[None, None, None, "server_error"]) as server:
        with pytest.raises(RouteFailed):
            _run(demo_card, server, tmp_path, ticks=3, retry=once)
        received = server.request_count
        gate.set()
    path = tmp_path / "merger-review__branching__stub-test-model__ticks3__s3.jsonl"
    calls = [line.record.data for line in read_trace(path).of_type("llm_call")]
    assert received >= 4
    assert sum(c.attempts for c in calls) >= received  # every request the server read
    cut = [c for c in calls if c.error == CANCELLED]
    assert len(cut) >= 2
    for c in cut:
        assert c.attempts == 1 and c.errors[-1].kind == "cancelled"
        assert c.cache == "miss" and c.reply is None and c.timeline == "t0" and c.tick == 0
    assert verify_trace(path).exit_code == 3  # a failed run, resumable

    from worldsim.sim.resuming import resume_run

    models = ModelConfig(retry=FAST, cache_dir=tmp_path / "cache")
    with StubServer(seed=6) as server:
        result = anyio.run(
            lambda: resume_run(path, models=models, fsync=False, environ=_env(server))
        )
    assert verify_trace(result.trace).exit_code == 0


def test_a_missing_base_url_fails_before_any_trace(demo_card: Card, tmp_path: Path) -> None:
    config = RunConfig(
        card=demo_card,
        policy=load_policy("branching"),
        models=ModelConfig(model="acme/model-x"),
    )
    with pytest.raises(ConfigError, match="ACME_BASE_URL"):
        anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ={}))
    assert not list(tmp_path.rglob("*.jsonl"))


def test_a_run_stopped_by_its_budget_resumes_to_completion(demo_card: Card, tmp_path: Path) -> None:
    from worldsim.sim.resuming import resume_run

    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  test-model: {input: 100.0, output: 100.0}\n")
    trace = tmp_path / "merger-review__branching__stub-test-model__ticks3__s3.jsonl"
    # every call costs its worst case: the initializer's ($1.07) fits, the next one does not
    with StubServer(seed=6, usage=worst_case_usage) as server:
        with pytest.raises(BudgetExhausted):
            _run(demo_card, server, tmp_path, ticks=3, max_cost_usd=1.5, prices=prices)
        stopped = read_trace(trace)
        assert stopped.terminal is not None and stopped.terminal.data.resumable
        models = ModelConfig(retry=FAST, cache_dir=tmp_path / "cache")
        result = anyio.run(
            lambda: resume_run(trace, models=models, fsync=False, environ=_env(server))
        )
        calls_after = server.request_count
        whole = _run(demo_card, server, tmp_path / "whole", ticks=3, cache_dir=tmp_path / "cache")
        assert server.request_count == calls_after  # everything came from the cache
    verdict = verify_trace(result.trace, canonical=True)
    assert verdict.exit_code == 0 and verdict.complete
    assert verdict.canonical == verify_trace(whole.trace, canonical=True).canonical
    assert [line.type for line in read_trace(trace).lines].count("run_failed") == 1


def test_a_strict_replay_miss_ends_the_run(demo_card: Card, tmp_path: Path) -> None:
    from worldsim.domain.errors import ReplayMissError

    with StubServer(seed=8) as server, pytest.raises(ReplayMissError):
        _run(demo_card, server, tmp_path, ticks=2, replay_strict=True)
        assert server.request_count == 0
    trace = read_trace(tmp_path / "merger-review__branching__stub-test-model__ticks2__s3.jsonl")
    assert trace.terminal is not None and trace.terminal.type == "run_failed"
    assert trace.terminal.data.kind == "ReplayMissError"


def test_a_custom_tick_role_keeps_its_class_on_a_model_route(
    demo_card: Card, tmp_path: Path
) -> None:
    from tests.test_roles import MarketMaker  # registers "market_maker"

    data = demo_card.model_dump(mode="json")
    data["seeds"]["actors"].append(
        {
            "id": "mm",
            "name": "Market Maker",
            "role": "market_maker",
            "stance": 0.0,
            "influence": 0.8,
            "activity": 1.0,
        }
    )
    with StubServer(seed=9) as server:
        # the card's own world (the model would invent its own actors)
        result = _run(
            Card.model_validate(data),
            server,
            tmp_path,
            ticks=2,
            role_models=("initializer=offline",),
        )
    trace = read_trace(result.trace)
    # a Python role is handed its route's model; this one never calls it
    assert trace.started.routes["market_maker"] == "stub/test-model"
    assert trace.started.prompt_versions["market_maker"] == "python"
    assert not [c for c in trace.of_type("llm_call") if c.record.data.role == "market_maker"]
    mine = [p.data for p in trace.proposals() if p.data.agent == "mm"]
    assert mine and all("quotes" in p.summary for p in mine)
    assert MarketMaker.name == "market_maker"
