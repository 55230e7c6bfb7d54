"""Fragments of API keys are redacted from everything a server says, wherever it is recorded."""

from __future__ import annotations

import itertools
import json
import random
import string
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from worldsim.domain.cards import Card
from worldsim.domain.config import ModelConfig, RetrySettings, RunConfig
from worldsim.domain.errors import RouteFailed
from worldsim.domain.policy import load_policy
from worldsim.models import Redactor
from worldsim.models.secrets import MIN_FRAGMENT, REDACTED
from worldsim.sim.session import run_card
from worldsim.testing import StubReply, StubServer, fake_value

KEY = "sk-proj-Zq7RxW2mLk9VbN4tYc8HfJ3d"
OTHER_KEY = "or-v1-8c1d55e0b9a24f6e9d7a"
KEY_ALPHABET = string.ascii_letters + string.digits + "-_"
FAST = RetrySettings(
    max_attempts=4,
    timeout_s=2.0,
    backoff_initial_s=0.001,
    backoff_max_s=0.01,
    jitter_s=0.001,
    retry_after_cap_s=0.01,
)


def _grams(key: str) -> set[str]:
    return {key[i : i + MIN_FRAGMENT] for i in range(len(key) - MIN_FRAGMENT + 1)}


def _echoes(key: str) -> list[str]:
    """What a careless server quotes back: prefix, middle, suffix, six characters, the whole."""
    return [key[:19], key[7:20], key[-9:], key[10:16], key]


# ------------------------------------------------------------------------------ the function


def test_fragments_of_six_or_more_are_redacted_and_five_are_not() -> None:
    redact = Redactor([KEY, OTHER_KEY])
    for fragment in [*_echoes(KEY), OTHER_KEY[3:12]]:
        text = f"Incorrect API key provided: {fragment}. See the docs."
        assert redact(text) == f"Incorrect API key provided: {REDACTED}. See the docs."
    assert redact(f"key {KEY[4:9]} is five") == f"key {KEY[4:9]} is five"
    # two fragments side by side become one mark; ordinary text is untouched
    assert redact(KEY[:8] + KEY[-8:]) == REDACTED
    assert redact("nothing secret here at all") == "nothing secret here at all"


def test_placeholder_and_short_keys_redact_nothing() -> None:
    from worldsim.models.routes import resolve_settings

    local = resolve_settings(
        "vllm/m", environ={"VLLM_BASE_URL": "http://127.0.0.1:8000/v1"}, dotenv=None
    )
    redact = Redactor([local.secret_key, "k", None])
    assert not redact
    assert redact("the key is not needed") == "the key is not needed"


@settings(max_examples=300, deadline=None)
@given(
    key=st.text(KEY_ALPHABET, min_size=MIN_FRAGMENT, max_size=64),
    data=st.data(),
    before=st.text(" .,:;{}\"'!?\n", max_size=40),
    after=st.text(" .,:;{}\"'!?\n", max_size=40),
)
def test_no_six_characters_of_a_key_survive_anywhere_in_the_text(
    key: str, data: st.DataObject, before: str, after: str
) -> None:
    start = data.draw(st.integers(0, len(key) - MIN_FRAGMENT), label="start")
    end = data.draw(st.integers(start + MIN_FRAGMENT, len(key)), label="end")
    noise = data.draw(st.text(KEY_ALPHABET, max_size=30), label="noise")
    text = before + key[start:end] + after + noise
    redacted = Redactor([key])(text)
    # the text before the fragment holds none of the key's characters: it is kept as it was
    assert redacted.startswith(before + REDACTED)
    # what is left between the marks holds no run of six characters of the key
    for piece in redacted.split(REDACTED):
        assert not any(gram in piece for gram in _grams(key))


@settings(max_examples=200, deadline=None)
@given(key=st.text(KEY_ALPHABET, min_size=MIN_FRAGMENT, max_size=64), data=st.data())
def test_a_five_character_fragment_is_left_as_it_is(key: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(key) - 5), label="start")
    text = f"<{key[start : start + 5]}>"
    assert Redactor([key])(text) == text


def test_a_long_body_is_scanned_in_one_pass() -> None:
    keys = [KEY, OTHER_KEY, *(f"sk-test-{i:02d}-" + "aB3dE6gH9jK2mN5pQ8" for i in range(8))]
    redact = Redactor(keys)
    body = (string.ascii_letters + string.digits + " ,.{}") * 30_000 + KEY[2:21]  # ~2 MB
    started = time.perf_counter()
    out = redact(body)
    elapsed = time.perf_counter() - started
    assert out.endswith(REDACTED) and len(out) < len(body)
    # one regex pass takes well under a second; a scan per key fragment would take minutes
    assert elapsed < 5.0


# ------------------------------------------------------------------------- a whole run


def test_a_server_echoing_the_key_leaves_no_fragment_in_trace_cache_logs_or_stderr(
    demo_card: Card,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    echoes = _echoes(KEY)
    numbers = itertools.count(1)  # next() on a count is atomic across the server's threads

    def script(body: dict[str, Any]) -> Any:
        """A quarter of the requests fail with the key in the body and headers (a 500, which is
        retried), and the twelfth with a 401 (which is not: it ends the run, its error
        recorded); a third of the replies quote it in their content."""
        n = next(numbers)
        echo = echoes[n % len(echoes)]
        headers = {"x-echo-key": echo, "www-authenticate": f'Bearer key="{echo}"'}
        if n % 4 == 1:
            return StubReply(500, {"error": {"message": f"upstream rejected key {echo}"}}, headers)
        if n == 12:
            message = f"Incorrect API key provided: {echo}***"
            return StubReply(401, {"error": {"message": message}}, headers)
        schema = body["response_format"]["json_schema"]["schema"]
        content = fake_value(schema, random.Random(n))
        strings = [k for k, v in content.items() if isinstance(v, str)] if n % 3 == 0 else []
        if strings:
            content[strings[0]] = f"{echo} {content[strings[0]]}"
        return content

    config = RunConfig(
        card=demo_card,
        policy=load_policy("branching"),
        seed=1,
        ticks=2,
        models=ModelConfig(model="stub/test-model", retry=FAST, cache_dir=tmp_path / "c"),
    )
    with capture_logs() as logs, StubServer(script, seed=3) as server:
        env = {"STUB_API_KEY": KEY, "STUB_BASE_URL": server.base_url}
        with pytest.raises(RouteFailed, match="401"):
            anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ=env))
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert server.request_count == 12
    trace = (tmp_path / "merger-review__branching__stub-test-model__ticks2__s1.jsonl").read_bytes()
    assert b'"type":"run_failed"' in trace
    assert REDACTED.encode() in trace  # the echoes did reach the recorded text, redacted
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.startswith("responses.sqlite") for p in files)
    captured = capfd.readouterr()
    recorded = [
        *(p.read_bytes() for p in files),
        json.dumps(logs, default=str).encode(),
        caplog.text.encode(),
        (captured.out + captured.err).encode(),
    ]
    for blob in recorded:
        for gram in _grams(KEY):
            assert gram.encode() not in blob
