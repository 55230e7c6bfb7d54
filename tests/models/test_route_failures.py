"""A run whose calls get no reply presents no forecast: a route that answers 500, or a port
nobody listens on, ends the run at once with one line naming the route and the error, a
resumable ``run_failed`` holding it, and ``score`` leaves the trace out by name. A reply that
stays invalid after its repair is the model's answer, and the run goes on (the rule in
docs/models.md)."""

from __future__ import annotations

import itertools
import json
import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import DEMO_CARD, ROOT, cli_on_stub, invoke, run_on_stub
from worldsim.domain.cards import load_card
from worldsim.domain.config import ModelConfig, RetrySettings, RunConfig
from worldsim.domain.errors import RouteFailed
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.testing import Faults, StubReply, StubServer, fake_value
from worldsim.trace.reader import read_trace

LABELS = ROOT / "scenarios" / "labels"
TRACE = "merger-review__branching__stub-test-model__s0.jsonl"
FAST = {"max_attempts": 2, "backoff_initial_s": 0.001, "backoff_max_s": 0.01, "jitter_s": 0.0}


@contextmanager
def server_error() -> Iterator[str]:
    with StubServer(faults=Faults(server_error=1.0)) as server:
        yield server.base_url


@contextmanager
def closed_port() -> Iterator[str]:
    with socket.socket() as s:  # a port that was free a moment ago, and is closed now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize(
    ("where", "error"), [(server_error, "server_error"), (closed_port, "connection")]
)
def test_a_run_whose_route_gives_no_reply_fails_and_score_says_why(
    tmp_path: Path, where: Any, error: str
) -> None:
    with where() as base_url:
        done = run_on_stub(base_url, tmp_path, "--max-attempts", "2")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stdout == ""  # no summary, no forecast
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: stub/test-model: gave up after 2 attempts")
    assert error in last
    trace = read_trace(tmp_path / TRACE)
    assert trace.terminal is not None and trace.terminal.type == "run_failed"
    assert trace.terminal.data.kind == "RouteFailed" and trace.terminal.data.resumable
    assert error in trace.terminal.data.error
    assert trace.first("extraction") is None
    failed = list(trace.of_type("llm_call"))
    assert len(failed) == 1 and failed[0].data.error is not None

    # score leaves it out by name, and says why
    offline = invoke("run", DEMO_CARD, "--seed", "1", "--out", tmp_path / "ok")
    assert offline.code == 0
    scored = invoke("score", tmp_path / TRACE, tmp_path / "ok", "--labels", LABELS)
    assert scored.code == 0
    assert f"{tmp_path / TRACE}: no result: the run failed: stub/test-model: gave up" in scored.err
    assert "skipped" in scored.err
    alone = invoke("score", tmp_path / TRACE, "--labels", LABELS)
    assert alone.code == 3 and "no completed predictions" in alone.err  # as verify says
    assert "the run failed" in alone.err and error in alone.err


def test_an_invalid_reply_lets_the_run_go_on_where_a_route_without_reply_ends_it(
    tmp_path: Path,
) -> None:
    """The rule for a run whose calls fail in part: a cohort whose replies never fit its
    schema sits its ticks out and the run goes on; the reviewer's call that gets only 500s
    ends it, on its second tick."""
    reviews = itertools.count()

    def script(body: dict[str, Any]) -> Any:
        system = body["messages"][0]["content"]
        if system.startswith("You model a population segment"):
            return {"not": "a cohort output"}
        if system.startswith("You are the governance reviewer"):
            if next(reviews) >= 1:
                return StubReply(500, {"error": {"message": "upstream failed"}})
            return {"decision": "continue", "reason": "nothing settled yet"}
        schema = body["response_format"]["json_schema"]["schema"]
        return json.dumps(fake_value(schema, random.Random(len(system))))

    models = ModelConfig(model="stub/test-model", cache="off", retry=RetrySettings(**FAST))
    config = RunConfig(
        card=load_card(DEMO_CARD), policy=load_policy("no_branch"), seed=0, ticks=3
    ).model_copy(update={"models": models})
    with StubServer(script) as server:
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        with pytest.raises(RouteFailed, match="server_error"):
            anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ=env))
    trace = read_trace(tmp_path / "merger-review__no_branch__stub-test-model__ticks3__s0.jsonl")
    assert trace.terminal is not None and trace.terminal.data.kind == "RouteFailed"
    calls = [c.data for c in trace.of_type("llm_call")]
    cohorts = [c for c in calls if c.role == "cohort"]
    assert {c.tick for c in cohorts} == {0, 1}  # tick 0 committed without the cohorts
    assert all(c.error and "invalid output" in c.error for c in cohorts)
    reviewer = [c for c in calls if c.role == "governance"]
    assert [c.error is None for c in reviewer] == [True, False]
    assert [line.record.tick for line in trace.of_type("tick_committed")] == [0]


def test_a_run_that_failed_before_its_world_resumes_by_starting_again_in_place(
    tmp_path: Path,
) -> None:
    """Its trace says resumable, and `run --resume` keeps that promise: with nothing to carry
    on from, the run starts again from its recorded settings, into the same file."""
    with server_error() as base_url:
        failed = run_on_stub(base_url, tmp_path, "--max-attempts", "1")
    assert failed.returncode == 1
    path = tmp_path / TRACE
    before = read_trace(path)
    assert before.first("world_initialized") is None
    assert before.terminal is not None and before.terminal.data.resumable
    with StubServer(seed=1) as server:
        resumed = cli_on_stub(
            server.base_url, tmp_path / "cache", "run", "--resume", str(path), "--json"
        )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["trace"] == str(path)
    after = read_trace(path)
    assert after.complete and after.started.seed == before.started.seed
    assert after.started.config == before.started.config
    assert invoke("verify", path).code == 0
