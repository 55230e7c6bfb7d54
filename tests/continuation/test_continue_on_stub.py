"""What a continued run costs on a model route (a stub OpenAI-compatible server on 127.0.0.1):
no initializer call and no call for a tick before its date; one assessor call per particle
for all its news, the calls of the ticks it runs, and the report."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import anyio
import pytest

from tests.continuation.test_continue import CUT, NEWS_CARD
from tests.support import invoke
from worldsim.domain.cards import load_card, parse_utc
from worldsim.domain.config import ModelConfig, RetrySettings, RunConfig
from worldsim.domain.policy import load_policy
from worldsim.roles.prompts import known_prompt_roles
from worldsim.sim.continuation import continue_run, continued_name
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace

FAST = RetrySettings(max_attempts=2, timeout_s=5.0, backoff_initial_s=0.001, jitter_s=0.001)


def _continue_on_stub(parent: Path, models: ModelConfig) -> tuple[RunResult, int]:
    """``parent`` continued to CUT against a stub server: the result, and the requests served."""
    with StubServer(seed=1) as server:
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        child = anyio.run(
            lambda: continue_run(parent, parse_utc(CUT), models=models, fsync=False, environ=env)
        )
        return child, server.request_count


def test_a_continuation_pays_one_assessor_call_per_particle_and_its_own_ticks(
    tmp_path: Path,
) -> None:
    models = ModelConfig(model="stub/test-model", retry=FAST, cache="off")
    config = RunConfig(
        card=load_card(NEWS_CARD), policy=load_policy("branching"), seed=0, models=models
    )
    with StubServer(seed=1) as server:
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        parent = anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ=env))
    child, served = _continue_on_stub(parent.trace, models)
    assert verify_trace(child.trace).complete
    trace = read_trace(child.trace)
    calls = [line.data for line in trace.lines if line.type == "llm_call"]
    particles = [line for line in trace.lines if line.type == "particle"]
    assert any(p.data.status == "running" for p in particles)  # so ticks run after the cut
    cut = trace.started.parent.tick
    roles = Counter(c.role for c in calls)
    assert served == len(calls) == sum(c.attempts for c in calls)
    assert "initializer" not in roles
    assert roles["assessor"] == len(particles) >= 1
    assert roles["reporter"] == 1
    ticked = [c for c in calls if c.role not in ("assessor", "reporter")]
    assert ticked and all(c.tick is not None and c.tick >= cut for c in ticked)
    assert {c.tick for c in calls if c.role == "assessor"} == {cut}


def test_the_assessors_front_matter_route_is_the_one_it_runs_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's assessor that names its own route is asked there; the ticks keep the
    parent's (offline) route."""
    text = known_prompt_roles()["assessor"][0].read_text(encoding="utf-8")
    routed = text.replace("phase: news\n", "phase: news\nroute: stub/test-model\n", 1)
    assert routed != text
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "assessor.md").write_text(routed, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    config = RunConfig(card=load_card(NEWS_CARD), policy=load_policy("branching"), seed=0)
    parent = anyio.run(lambda: run_card(config, tmp_path / "runs", fsync=False))
    models = ModelConfig(retry=FAST, cache="off")
    child, served = _continue_on_stub(parent.trace, models)
    trace = read_trace(child.trace)
    calls = [line.data for line in trace.lines if line.type == "llm_call"]
    particles = [line for line in trace.lines if line.type == "particle"]
    assert trace.started.routes["assessor"] == "stub/test-model"
    assert trace.started.routes["actor"] == "offline"
    assert {(c.role, c.provider, c.requested_model) for c in calls} == {
        ("assessor", "stub", "test-model")
    }
    assert served == len(calls) == len(particles) >= 1
    assert verify_trace(child.trace).complete


def test_a_continuation_its_budget_stops_before_its_news_is_weighed_says_to_start_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped by its budget before its re-weighting, a continued run cannot be resumed: its
    ``run_failed`` says so (``resumable`` false) and its one line gives the command that starts
    it again, which then finishes with a higher budget."""
    text = known_prompt_roles()["assessor"][0].read_text(encoding="utf-8")
    routed = text.replace("phase: news\n", "phase: news\nroute: stub/gpt-4o-mini\n", 1)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "assessor.md").write_text(routed, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    parent = invoke("run", NEWS_CARD, "--out", "runs", "--json")
    assert parent.code == 0, parent.err
    trace = Path(json.loads(parent.out)["trace"])
    with StubServer(seed=1) as server:
        monkeypatch.setenv("STUB_API_KEY", "k")
        monkeypatch.setenv("STUB_BASE_URL", server.base_url)
        cont = ["run", "--continue", trace, "--as-of", CUT]
        stopped = invoke(*cont, "--max-cost-usd", "0.0002")
        assert stopped.code == 1, stopped.err
        again = f"worldsim run --continue {trace} --as-of {CUT} --force"
        assert stopped.err.endswith(
            f"goes on: `{again} --max-cost-usd MORE` (it stopped before its news was weighed)"
        ), stopped.err
        child = trace.parent / continued_name(trace.name, parse_utc(CUT))
        terminal = read_trace(child).terminal
        assert terminal is not None and terminal.type == "run_failed"
        assert terminal.data.resumable is False
        assert "before its news was weighed" in invoke("run", "--resume", child).err
        done = invoke(*cont, "--force", "--max-cost-usd", "1")
        assert done.code == 0, done.err
    assert verify_trace(child).complete
