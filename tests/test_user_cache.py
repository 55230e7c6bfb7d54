"""The user-level response cache: one per user, keyed by content and position, so an identical
run, forecast or study into any output folder asks no model; `worldsim cache info|prune`."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.study.conftest import CARDS, write_manifest
from tests.support import DEMO_CARD, invoke
from tests.test_cli import cli
from worldsim.domain.config import ModelConfig, RetrySettings, RouteOptions, RunConfig
from worldsim.domain.contracts import CallSite, ChatMessage, ModelRequest
from worldsim.domain.outputs import ForecastOutput
from worldsim.domain.policy import load_policy
from worldsim.models.cache import CACHE_FILE, cache_key, default_cache_dir, prune, summarize
from worldsim.sim.session import run_card
from worldsim.study.experiment import Experiment
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash

KEY = "sk-test-user-cache-0123456789"
FAST = RetrySettings(
    max_attempts=3,
    timeout_s=5,
    backoff_initial_s=0.001,
    backoff_max_s=0.01,
    jitter_s=0.001,
    retry_after_cap_s=0.01,
)


def _run(server: StubServer, out: Path, **routes: RouteOptions) -> Path:
    from tests.support import DEMO_CARD as card_path
    from worldsim.domain.cards import load_card

    config = RunConfig(
        card=load_card(card_path),
        policy=load_policy("no_branch"),
        seed=1,
        ticks=2,
        models=ModelConfig(model="stub/test-model", retry=FAST, routes=routes),
    )
    env = {"STUB_API_KEY": KEY, "STUB_BASE_URL": server.base_url}
    result = anyio.run(lambda: run_card(config, out, fsync=False, environ=env))
    return result.trace


def test_an_identical_run_into_a_new_folder_makes_no_request(
    tmp_path: Path, user_cache: Path
) -> None:
    with StubServer(seed=6) as server:
        first = _run(server, tmp_path / "a")
        paid = server.request_count
        assert paid > 0
        second = _run(server, tmp_path / "b")
        assert server.request_count == paid
    assert (user_cache / CACHE_FILE).is_file()
    a, b = read_trace(first), read_trace(second)
    assert canonical_hash(a) == canonical_hash(b)
    assert {line.data.cache for line in b.of_type("llm_call")} == {"hit"}
    assert KEY.encode() not in (user_cache / CACHE_FILE).read_bytes()


def test_a_route_setting_that_changes_the_request_is_a_miss(tmp_path: Path) -> None:
    with StubServer(seed=6) as server:
        _run(server, tmp_path / "a")
        paid = server.request_count
        _run(server, tmp_path / "b", **{"stub/test-model": RouteOptions(temperature=0.9)})
        hotter = server.request_count
        assert hotter > paid  # another temperature: every call asked again
        _run(server, tmp_path / "c", **{"stub/test-model": RouteOptions(max_tokens_scale=2.0)})
        assert server.request_count > hotter
        _run(server, tmp_path / "d", **{"stub/test-model": RouteOptions(temperature=0.9)})
        assert server.request_count > hotter  # c asked; d is answered like b
        after_d = server.request_count
        _run(server, tmp_path / "e", **{"stub/test-model": RouteOptions(temperature=0.9)})
        assert server.request_count == after_d


def test_an_identical_study_into_a_new_folder_makes_no_request(tmp_path: Path) -> None:
    with StubServer(seed=3) as server:
        env = {"STUB_BASE_URL": server.base_url, "STUB_API_KEY": KEY}
        path = write_manifest(
            tmp_path,
            cards=[CARDS[0]],
            seeds=[0, 1],
            forecast_dates=["card"],
            methods=[
                {
                    "label": "stub-run",
                    "run": {
                        "policy": "no_branch",
                        "model": "stub/test-model",
                        "ticks": 2,
                        "retry": FAST.model_dump(),
                    },
                },
                {"label": "stub-direct", "forecast": {"model": "stub/test-model"}},
            ],
        )
        experiment = Experiment.from_yaml(path, environ=env)
        first = experiment.run_sync(tmp_path / "one", fsync=False)
        paid = server.request_count
        assert paid > 0 and all(r.status == "complete" for r in first)
        second = experiment.run_sync(tmp_path / "two", fsync=False)
        assert server.request_count == paid
    assert [r.canonical_hash for r in second] == [r.canonical_hash for r in first]
    assert [r.p_yes for r in second] == [r.p_yes for r in first]


def test_cache_dir_flag_and_info_and_prune(tmp_path: Path, user_cache: Path) -> None:
    folder = tmp_path / "my-cache"
    with StubServer(seed=6) as server:
        _run(server, tmp_path / "a")
    assert not folder.exists()
    info = invoke("cache", "info", "--json")
    assert info.code == 0, info.err
    data = json.loads(info.out)
    assert data["path"] == str(user_cache / CACHE_FILE)
    assert data["entries"] > 0 and data["routes"] == {"stub/test-model": data["entries"]}
    assert data["bytes"] > 0 and data["oldest"] <= data["newest"]
    assert invoke("cache", "info", "--cache-dir", folder).code == 0  # empty: nothing made
    assert not folder.exists()

    old = invoke("cache", "prune", "--older-than", "1")
    assert old.code == 0 and "pruned 0 replies" in old.out
    with sqlite3.connect(user_cache / CACHE_FILE) as db:  # age one reply by two days
        stamp = (datetime.now(UTC) - timedelta(days=2)).isoformat(timespec="seconds")
        db.execute("UPDATE responses SET stored_at=? WHERE rowid=1", (stamp,))
    aged = invoke("cache", "prune", "--older-than", "1")
    assert aged.code == 0 and "pruned 1 replies" in aged.out
    assert summarize(user_cache / CACHE_FILE).entries == data["entries"] - 1
    everything = invoke("cache", "prune", "--all")
    assert everything.code == 0
    assert summarize(user_cache / CACHE_FILE).entries == 0

    neither = invoke("cache", "prune")
    assert neither.code == 2 and "--older-than" in neither.err


@pytest.mark.parametrize("days", ["inf", "800000", "36500.5"])
def test_an_age_past_a_century_is_refused_naming_the_option(tmp_path: Path, days: str) -> None:
    """A date that far back is not a date (it overflowed into a traceback)."""
    out = cli("cache", "prune", "--older-than", days, "--cache-dir", str(tmp_path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "'--older-than'" in out.stderr and "36500" in out.stderr


def test_a_damaged_cache_file_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / CACHE_FILE).write_bytes(b"this is not a database" * 100)
    for args in (("info",), ("prune", "--all")):
        out = invoke("cache", *args, "--cache-dir", folder)
        assert out.code == 2
        assert str(folder / CACHE_FILE) in out.err and "response cache" in out.err
    with StubServer(seed=6) as server:
        monkeypatch.setenv("STUB_BASE_URL", server.base_url)
        monkeypatch.setenv("STUB_API_KEY", KEY)
        run = invoke(
            "run",
            DEMO_CARD,
            "--model",
            "stub/test-model",
            "--out",
            tmp_path / "out",
            "--cache-dir",
            folder,
        )
        assert server.request_count == 0
    assert run.code == 2 and str(folder / CACHE_FILE) in run.err
    assert not list(tmp_path.glob("out/*.jsonl"))  # nothing half-written


def test_the_default_folder_follows_the_environment() -> None:
    home = Path.home()
    assert default_cache_dir({}) == home / ".cache" / "worldsim"
    assert default_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/worldsim")
    both = {"XDG_CACHE_HOME": "/x", "WORLDSIM_CACHE_DIR": "/w"}
    assert default_cache_dir(both) == Path("/w")


def test_pruning_a_missing_cache_is_nothing(tmp_path: Path) -> None:
    assert prune(tmp_path / "none" / CACHE_FILE, stored_before=None) == 0
    assert summarize(tmp_path / "none" / CACHE_FILE).entries == 0


_text = st.text(max_size=20)


@given(
    a=st.tuples(_text, st.floats(0, 2), st.integers(1, 4000), st.integers(0, 5), _text),
    b=st.tuples(_text, st.floats(0, 2), st.integers(1, 4000), st.integers(0, 5), _text),
)
def test_equal_requests_share_a_key_and_different_ones_do_not(
    a: tuple[str, float, int, int, str], b: tuple[str, float, int, int, str]
) -> None:
    def request(content: str, temperature: float, max_tokens: int, index: int) -> ModelRequest:
        return ModelRequest(
            messages=(ChatMessage("user", content),),
            output_type=ForecastOutput,
            site=CallSite(role="actor", agent="a", timeline="t0", tick=1, index=index),
            prompt_version="v1",
            temperature=temperature,
            max_tokens=max_tokens,
        )

    ka = cache_key("stub/m", request(*a[:4]), a[4])
    kb = cache_key("stub/m", request(*b[:4]), b[4])
    assert (ka == kb) == (a == b)
