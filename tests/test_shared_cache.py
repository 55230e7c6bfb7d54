"""Runs sharing one response cache at once: both complete and the cache stays whole."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.support import DEMO_CARD
from worldsim.domain.contracts import CallSite, ChatMessage, ModelRequest
from worldsim.domain.errors import WorldsimRuntimeError
from worldsim.domain.outputs import ForecastOutput
from worldsim.models import ResponseCache
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]


def _request(index: int, agent: str) -> ModelRequest:
    return ModelRequest(
        messages=(ChatMessage("user", f"question {index}"),),
        output_type=ForecastOutput,
        site=CallSite(role="actor", agent=agent, timeline="t0", tick=1, index=index),
        prompt_version="v",
    )


def test_two_connections_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"

    async def writer(agent: str) -> None:
        async with await ResponseCache.open(path) as cache:
            for i in range(150):
                await cache.put("stub/m", _request(i, agent), f"{agent}-{i}", {"n": i})
                assert (await cache.get("stub/m", _request(i, agent))) is not None

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            for agent in ("a", "b", "c"):
                tg.start_soon(writer, agent)
        async with await ResponseCache.open(path) as cache:
            assert await cache.count() == 450
            entry = await cache.get("stub/m", _request(149, "b"))
            assert entry is not None and entry.reply == "b-149"

    anyio.run(scenario)


def test_runs_opening_a_new_cache_at_once_all_get_it(tmp_path: Path) -> None:
    """Switching a new file to WAL is a lock SQLite does not wait for; every opener gets in."""

    async def opener(path: Path, agent: str) -> None:
        async with await ResponseCache.open(path) as cache:
            await cache.put("stub/m", _request(0, agent), "reply", {})

    async def scenario() -> None:
        for round_ in range(12):
            path = tmp_path / f"cache{round_}.sqlite"
            async with anyio.create_task_group() as tg:
                for agent in "abcdef":
                    tg.start_soon(opener, path, agent)
            async with await ResponseCache.open(path) as cache:
                assert await cache.count() == 6

    anyio.run(scenario)


def test_a_cache_that_cannot_be_written_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"

    async def scenario() -> None:
        async with await ResponseCache.open(path) as cache:
            with sqlite3.connect(path) as other:
                other.execute("DROP TABLE responses")
            with pytest.raises(WorldsimRuntimeError) as info:
                await cache.put("stub/m", _request(0, "a"), "reply", {})
            assert str(info.value).startswith(f"{path}: cannot write the response cache: ")

    anyio.run(scenario)


def test_two_runs_at_once_share_a_cache_and_replay_from_it(tmp_path: Path) -> None:
    """Two `worldsim run`s against a stub server write one cache file together; afterwards it
    checks out, holds every call of both, and a strict replay of each calls no model."""
    cache = tmp_path / "shared"
    with StubServer(seed=4) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}

        def start(seed: int, out: str, *extra: str) -> subprocess.Popen[str]:
            return subprocess.Popen(
                [
                    *WORLDSIM,
                    "run",
                    str(DEMO_CARD),
                    "--model",
                    "stub/test-model",
                    "--seed",
                    str(seed),
                    "--ticks",
                    "3",
                    "--out",
                    str(tmp_path / out),
                    "--cache-dir",
                    str(cache),
                    "--json",
                    *extra,
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

        def finish(procs: list[subprocess.Popen[str]]) -> None:
            for proc in procs:
                _, err = proc.communicate(timeout=300)
                assert proc.returncode == 0, err

        finish([start(1, "live"), start(2, "live")])
        calls = server.request_count
        finish([start(1, "replay", "--replay-strict"), start(2, "replay", "--replay-strict")])
        assert server.request_count == calls

    with sqlite3.connect(cache / "responses.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = conn.execute("SELECT count(*) FROM responses").fetchone()[0]
    misses = 0
    for seed in (1, 2):
        name = f"merger-review__branching__stub-test-model__ticks3__s{seed}.jsonl"
        live, replayed = tmp_path / "live" / name, tmp_path / "replay" / name
        misses += sum(
            1 for line in read_trace(live).of_type("llm_call") if line.data.cache == "miss"
        )
        assert (
            verify_trace(replayed, canonical=True).canonical
            == verify_trace(live, canonical=True).canonical
        )
    assert rows == misses == calls
