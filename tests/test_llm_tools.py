"""LLM actors call the gateway's tools themselves; the tool logs every access, cached or live."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio

from worldsim.domain.cards import Card
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.testing import StubServer
from worldsim.testing.stub_server import StubReply
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash, verify_trace

FUTURE = "mr-f01"


def _completion(message: dict[str, Any], finish: str) -> StubReply:
    return StubReply(
        200,
        {
            "id": "chatcmpl-tools",
            "object": "chat.completion",
            "created": 0,
            "model": "tool-model",
            "choices": [
                {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    )


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def script(body: dict[str, Any]) -> Any:
    """Search, then try the future document, then open the first hit, then answer."""
    tool_msgs = [m for m in body["messages"] if m["role"] == "tool"]
    if "tools" in body and len(tool_msgs) == 0:
        return _completion(
            {
                "content": None,
                "tool_calls": [
                    _call("search_evidence", {"query": "Regulator R merger remedies", "k": 3})
                ],
            },
            "tool_calls",
        )
    if "tools" in body and len(tool_msgs) == 1:
        hits = json.loads(tool_msgs[0]["content"])["results"]
        return _completion(
            {
                "content": None,
                "tool_calls": [
                    _call("open_document", {"doc_id": FUTURE}),
                    _call("open_document", {"doc_id": hits[0]["id"]}),
                ],
            },
            "tool_calls",
        )
    opened = [json.loads(m["content"]) for m in tool_msgs[1:]]
    cites = [o["document"]["id"] for o in opened if "document" in o]
    return {
        "proposals": [
            {
                "kind": "action",
                "endpoint": "cleared",
                "direction": 0.4,
                "magnitude": 0.5,
                "summary": "acts on what it read",
                "cites": cites,
            }
        ]
    }


def test_actors_search_and_open_through_logged_tools(demo_card: Card, tmp_path: Path) -> None:
    assert demo_card.evidence  # the demo card carries dated documents, one after its as-of
    with StubServer(script=script) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}

        def run(out: Path, strict: bool = False) -> Path:
            models = ModelConfig(
                model="offline",
                role_models=("actor=stub/tool-model",),
                cache_dir=tmp_path / "cache",
                replay_strict=strict,
            )
            config = RunConfig(
                card=demo_card, policy=load_policy("no_branch"), seed=2, ticks=2, models=models
            )
            result = anyio.run(lambda: run_card(config, out, fsync=False, environ=env))
            return result.trace

        live = run(tmp_path / "live")
        requests = server.request_count
        cached = run(tmp_path / "cached", strict=True)
        assert server.request_count == requests  # the cached run calls nothing

    trace = read_trace(live)
    assert verify_trace(live).exit_code == 0
    calls = [line.record.data for line in trace.of_type("llm_call")]
    assert calls and all(
        [t.name for t in c.tool_calls] == ["search_evidence", "open_document", "open_document"]
        for c in calls
    )
    retrievals = trace.accesses()
    refused = [r for r in retrievals if r.refused]
    assert refused and all(r.doc_id == FUTURE and r.reason == "after_cutoff" for r in refused)
    proposals = [p.data for p in trace.proposals() if p.data.role == "actor"]
    assert proposals and all(p.cites and not p.unretrieved_citations for p in proposals)
    prompts = [json.dumps(r.body) for r in server.requests]
    future_text = next(d.text for d in demo_card.evidence if d.id == FUTURE)  # type: ignore[union-attr]
    assert not any(future_text in p for p in prompts)
    assert canonical_hash(read_trace(cached)) == canonical_hash(trace)
