"""Every model call's prompt is in its trace record, as the server received it."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.support import DEMO_CARD
from worldsim.domain.cards import load_card
from worldsim.domain.config import ModelConfig, RetrySettings, RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.view.extract import trace_data, verified


def test_the_trace_holds_each_prompt_the_server_received(tmp_path: Path) -> None:
    config = RunConfig(
        card=load_card(DEMO_CARD),
        policy=load_policy("no_branch"),
        seed=1,
        ticks=2,
        models=ModelConfig(
            model="stub/test-model", retry=RetrySettings(max_attempts=3, timeout_s=5)
        ),
    )
    with StubServer(seed=4) as server:
        env = {"STUB_API_KEY": "sk-9f3a1c7e5b2d8406a9e1c3", "STUB_BASE_URL": server.base_url}
        result = anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ=env))
        sent = [
            tuple((m["role"], m["content"]) for m in r.body["messages"]) for r in server.requests
        ]
    calls = list(read_trace(result.trace).of_type("llm_call"))
    assert calls
    recorded = [tuple((m.role, m.content) for m in c.data.messages or ()) for c in calls]
    assert all(recorded)
    assert set(recorded) == set(sent)  # retries resend a recorded prompt
    shown = trace_data(verified(result.trace))["calls"]
    assert [[(m["role"], m["content"]) for m in c["messages"]] for c in shown] == [
        list(r) for r in recorded
    ]
