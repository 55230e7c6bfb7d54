"""Slow, small and messy servers: streaming, the no-progress timeout, timeouts that raise the
next attempt's limit, the run's deadline, per-route settings, and the route check."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldsim.domain.config import ModelConfig, RouteOptions, load_routes_file
from worldsim.domain.errors import ConfigError, ModelError, RouteFailed
from worldsim.models import LlmCallData, ModelOptions, ModelPool, OpenAIModel, RouteTable
from worldsim.models.pool import is_local, route_options
from worldsim.models.preflight import Measurement, PlannedCall, estimate
from worldsim.models.routes import parse_route
from worldsim.testing.stub_server import Faults, StubServer

DEMO_CARD = Path(__file__).resolve().parents[2] / "scenarios" / "merger-review.yaml"
WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]


def _long(body: dict[str, Any]) -> dict[str, Any]:
    return {"p_yes": 0.4, "stance": "neutral", "rationale": "slow but steady " * 12}


@pytest.mark.asyncio
async def test_a_stalled_stream_times_out_and_the_next_attempt_answers(
    make_request: Any, fast_retry: Any
) -> None:
    server = StubServer(_long, stall_after_chunks=3, stall_first=1)
    async with server, OpenAIModel(server.settings(), retry=fast_retry(timeout_s=0.5)) as model:
        response = await model.request(make_request())
    call = LlmCallData.model_validate(response.call)
    assert call.attempts == 2
    assert [(e.kind, e.timeout_s) for e in call.errors] == [("timeout", 0.5)]
    assert server.requests[0].body["stream"] is True


@pytest.mark.asyncio
async def test_a_slow_steady_stream_outlasts_the_timeout_without_tripping_it(
    make_request: Any, fast_retry: Any
) -> None:
    # about 50 chunks 0.04 s apart: two seconds in all, four times the no-progress timeout
    server = StubServer(_long, chunk_delay_s=0.04)
    async with server, OpenAIModel(server.settings(), retry=fast_retry(timeout_s=0.5)) as model:
        response = await model.request(make_request())
    call = LlmCallData.model_validate(response.call)
    assert call.attempts == 1 and call.errors == []
    assert call.latency_s > 1.0
    assert call.usage.output_tokens > 0  # the usage chunk at the end of the stream


@pytest.mark.asyncio
async def test_a_timeout_on_a_local_route_raises_the_next_attempts_limit(
    make_request: Any, fast_retry: Any
) -> None:
    async with StubServer(_long, stall_after_chunks=1, stall_first=2) as server:
        options = ModelOptions(retry=fast_retry(timeout_s=0.3))
        pool = ModelPool(
            RouteTable.from_flags("local/stub"),
            options=options,
            environ={"LOCAL_BASE_URL": server.base_url},
            dotenv=None,
        )
        try:
            response = await pool.for_role("actor").request(make_request())
        finally:
            await pool.aclose()
    call = LlmCallData.model_validate(response.call)
    assert [e.timeout_s for e in call.errors] == [0.3, 0.6]
    assert call.attempts == 3


@pytest.mark.asyncio
async def test_retries_after_timeouts_stop_at_the_deadline_and_say_what_to_change(
    make_request: Any, fast_retry: Any
) -> None:
    async with StubServer(_long, stall_after_chunks=1) as server:
        policy = fast_retry(timeout_s=0.3, max_attempts=50).with_deadline(1.2)
        async with OpenAIModel(server.settings(), retry=policy) as model:
            with pytest.raises(ModelError) as caught:
                await model.request(make_request())
    message = str(caught.value)
    assert "deadline" in message and "timeout_s" in message and "models check" in message
    call = LlmCallData.model_validate(caught.value.call)
    assert 2 <= call.attempts <= 6 < 50


@pytest.mark.asyncio
async def test_a_key_split_across_chunks_is_redacted_in_the_assembled_reply(
    make_request: Any, fast_retry: Any
) -> None:
    key = "sk-local-0123456789abcdefghij"

    def leak(body: dict[str, Any]) -> dict[str, Any]:
        return {"p_yes": 0.5, "stance": "neutral", "rationale": f"the key is {key} ok"}

    async with StubServer(leak, chunk_chars=3) as server:
        settings_ = server.settings(api_key=key)
        async with OpenAIModel(settings_, retry=fast_retry()) as model:
            response = await model.request(make_request())
    assert key not in response.text and key[:12] not in json.dumps(dict(response.call))


@pytest.mark.asyncio
async def test_a_server_that_refuses_streaming_is_asked_without(
    make_request: Any, fast_retry: Any
) -> None:
    server = StubServer(faults=Faults(reject_stream=True))
    async with server, OpenAIModel(server.settings(), retry=fast_retry()) as model:
        first = await model.request(make_request(index=0))
        await model.request(make_request(index=1))
    kinds = [e.kind for e in LlmCallData.model_validate(first.call).errors]
    assert kinds == ["param_rejected"]
    assert [bool(r.body.get("stream")) for r in server.requests] == [True, False, False]


@pytest.mark.asyncio
async def test_route_options_force_the_mode_scale_max_tokens_and_set_temperature(
    make_request: Any, fast_retry: Any
) -> None:
    routes = {"local/stub": RouteOptions(output_mode="prompted", max_tokens_scale=0.5,
                                         temperature=0.9, max_attempts=1)}  # fmt: skip
    async with StubServer() as server:
        pool = ModelPool(
            RouteTable.from_flags("local/stub"),
            options=ModelOptions(retry=fast_retry(), routes=routes),
            environ={"LOCAL_BASE_URL": server.base_url},
            dotenv=None,
        )
        try:
            response = await pool.for_role("actor").request(make_request())
        finally:
            await pool.aclose()
    body = server.requests[0].body
    assert "response_format" not in body and body["max_tokens"] == 128
    assert body["temperature"] == 0.9
    assert LlmCallData.model_validate(response.call).output_mode == "text"


def test_local_routes_are_providers_or_loopback_hosts_unless_told() -> None:
    from worldsim.models.routes import RouteSettings

    loop = RouteSettings(parse_route("acme/m"), "http://127.0.0.1:8080/v1", "k")
    far = RouteSettings(parse_route("acme/m"), "https://api.acme.test/v1", "k")
    ollama = RouteSettings(parse_route("ollama/m"), "https://gpu.box/v1", "k")
    assert is_local(loop, RouteOptions()) and is_local(ollama, RouteOptions())
    assert not is_local(far, RouteOptions()) and not is_local(loop, RouteOptions(local=False))


def test_a_misspelt_route_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"routes\.smollm2"):
        route_options({"smollm2": RouteOptions()}, parse_route("local/smollm2"))


def test_routes_file_errors_name_the_file_and_field(tmp_path: Path) -> None:
    good = tmp_path / "routes.yaml"
    good.write_text("routes:\n  local/smollm2:\n    timeout_s: 300\n    output_mode: [text]\n")
    assert load_routes_file(good)["local/smollm2"].output_modes == ("text",)
    bad = tmp_path / "bad.yaml"
    bad.write_text("routes:\n  local/smollm2:\n    timeout_s: -1\n")
    with pytest.raises(ConfigError) as caught:
        load_routes_file(bad)
    assert caught.value.file == str(bad) and caught.value.field == "routes.local/smollm2.timeout_s"
    odd = tmp_path / "odd.yaml"
    odd.write_text("routes:\n  local/smollm2:\n    output_mode: grammar\n")
    with pytest.raises(ConfigError, match="output_mode"):
        load_routes_file(odd)


def test_the_run_config_takes_the_same_routes_block() -> None:
    config = ModelConfig.model_validate(
        {"routes": {"local/smollm2": {"timeout_s": 240, "max_connections": 1}}, "deadline_s": 900}
    )
    assert config.routes["local/smollm2"].max_connections == 1
    assert ModelConfig.model_validate(config.model_dump(mode="json")) == config


def _cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("LOCAL_")}
    full.update(env or {})
    return subprocess.run(
        [*WORLDSIM, *args], capture_output=True, text=True, cwd=cwd, env=full, timeout=120,
        check=False,
    )  # fmt: skip


def test_a_bad_routes_file_stops_the_run_with_one_line_and_nothing_written(tmp_path: Path) -> None:
    bad = tmp_path / "routes.yaml"
    bad.write_text("routes:\n  local/smollm2:\n    max_attempts: 0\n")
    out = tmp_path / "traces"
    proc = _cli("run", str(DEMO_CARD), "--routes", str(bad), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "routes.yaml" in proc.stderr and "routes.local/smollm2.max_attempts" in proc.stderr
    assert not out.exists()


def test_models_check_prints_speeds_modes_and_an_estimate(tmp_path: Path) -> None:
    with StubServer(chunk_delay_s=0.002, context_size=4096) as server:
        proc = _cli(
            "models", "check", "local/stub", "--card", str(DEMO_CARD), "--ticks", "2",
            "--deadline", "0.5",
            cwd=tmp_path, env={"LOCAL_BASE_URL": server.base_url},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "first token" in text and "tokens/s" in text and "context 4096 tokens" in text
    assert "output modes: json_schema ok" in text and "text ok" in text
    assert "estimate for merger-review.yaml (branching):" in text and " calls" in text
    assert "warning: role" in text and "deadline" in text  # no reply fits in half a second


def test_models_check_of_a_route_answering_no_json_prints_then_refuses(tmp_path: Path) -> None:
    """A server that answers prose in every output mode: measured, then exit 1 (it was 0)."""
    with StubServer(script=lambda request: "I would rather not say.") as server:
        proc = _cli(
            "models", "check", "local/stub", cwd=tmp_path, env={"LOCAL_BASE_URL": server.base_url}
        )
    assert proc.returncode == 1, proc.stderr
    assert "first token" in proc.stdout and "json_schema no" in proc.stdout
    assert "ok" not in proc.stdout.split("output modes:")[1]
    assert proc.stderr.strip().splitlines() == [
        f"error: route local/stub (127.0.0.1:{server.port}) answered, but in no output mode "
        "with a valid JSON object: a run on it would fail"
    ]


def test_models_check_refuses_the_offline_route(tmp_path: Path) -> None:
    proc = _cli("models", "check", "offline", cwd=tmp_path)
    assert proc.returncode == 2 and "offline" in proc.stderr


def test_models_check_of_a_route_that_does_not_answer_names_it_and_its_server(
    tmp_path: Path,
) -> None:
    with socket.socket() as sock:  # a port nothing listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = _cli(
        "models", "check", "local/stub", "--quick", "--timeout", "5", "--json",
        cwd=tmp_path, env={"LOCAL_BASE_URL": f"http://127.0.0.1:{port}/v1"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: route local/stub (127.0.0.1:") and "did not answer" in line


def test_the_estimate_warns_when_max_tokens_cannot_finish_within_the_timeout() -> None:
    m = Measurement("local/m", latency_s=0.5, free_tokens_per_s=80, constrained_tokens_per_s=2)
    calls = [PlannedCall("initializer", 2500, 400, 300), PlannedCall("actor", 100, 900, 60)]
    unstreamed = estimate(calls, m, timeout_s=60, streams=False)
    assert len(unstreamed.warnings) == 1 and "initializer" in unstreamed.warnings[0]
    assert "timeout_s" in unstreamed.warnings[0]
    scaled = estimate(calls, m, RouteOptions(max_tokens_scale=0.04), timeout_s=60, streams=False)
    assert scaled.warnings == ()
    free = estimate(calls, m, RouteOptions(output_mode="text"), timeout_s=60, streams=False)
    assert free.warnings == ()  # 2500 tokens at 80 tokens/s fit in a minute
    assert unstreamed.wall_s is not None and free.wall_s is not None
    assert free.wall_s < unstreamed.wall_s


@given(
    speed=st.floats(0.5, 500),
    lanes=st.integers(1, 8),
    outs=st.lists(st.integers(1, 4000), min_size=1, max_size=20),
)
@settings(max_examples=60, deadline=None)
def test_estimate_typical_time_never_exceeds_the_worst_case(
    speed: float, lanes: int, outs: list[int]
) -> None:
    m = Measurement("local/m", latency_s=0.2, constrained_tokens_per_s=speed)
    calls = [PlannedCall("r", max_tokens=o + 10, prompt_tokens=100, output_tokens=o) for o in outs]
    e = estimate(calls, m, concurrency=lanes)
    assert e.wall_s is not None and e.worst_wall_s is not None
    assert 0 < e.wall_s <= e.worst_wall_s
    assert e.output_tokens == sum(outs) and e.calls == len(outs)


@pytest.mark.asyncio
async def test_a_retry_after_past_the_deadline_is_not_waited_and_says_the_rate_limit(
    make_request: Any, fast_retry: Any, sleeps: Any
) -> None:
    faults = Faults(rate_limit=1.0, retry_after="3600")
    async with StubServer(faults=faults) as server:
        policy = fast_retry(max_attempts=3, retry_after_cap_s=60.0)
        policy = dataclasses.replace(policy, sleep=sleeps).with_deadline(5.0)
        model = OpenAIModel(server.settings(), retry=policy)
        with pytest.raises(RouteFailed) as caught:
            await model.request(make_request())
        await model.aclose()
    message = str(caught.value)
    assert sleeps.waits == [] and server.request_count == 1
    assert "deadline ran out while waiting on the route's rate limit" in message
    assert "Retry-After 3600 s" in message and "timeout_s" not in message
    assert [e["kind"] for e in caught.value.call["errors"]] == ["rate_limit", "deadline"]


@pytest.mark.asyncio
async def test_a_retry_after_within_the_deadline_is_waited(
    make_request: Any, fast_retry: Any, sleeps: Any
) -> None:
    async with StubServer(fault_sequence=["rate_limit"], faults=Faults(retry_after="2")) as server:
        policy = fast_retry(max_attempts=3, retry_after_cap_s=60.0)
        policy = dataclasses.replace(policy, sleep=sleeps).with_deadline(30.0)
        model = OpenAIModel(server.settings(), retry=policy)
        response = await model.request(make_request())
        await model.aclose()
    assert sleeps.waits == [2.0] and response.call["attempts"] == 2
