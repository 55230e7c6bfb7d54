"""LLM roles with in-process scripted models: semantics checked, leaks and claims audited."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio
import pytest

from worldsim.domain.cards import Card
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.contracts import Model, ModelRequest
from worldsim.domain.errors import LeakageError
from worldsim.domain.outputs import (
    TEMPLATE_NAMES,
    ActorOutput,
    CohortOutput,
    GovernanceOutput,
    ReportOutput,
    WorldOutput,
)
from worldsim.domain.policy import load_policy
from worldsim.roles.prompts import PromptRole
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult
from worldsim.testing import ScriptedModel
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace

SECRET = "Northwind Steel"


def script(request: ModelRequest) -> dict[str, Any]:
    out = request.output_type
    if out is ActorOutput:
        return {
            "proposals": [
                {
                    "kind": "action",
                    "endpoint": "cleared",
                    "direction": 0.6,
                    "magnitude": 0.5,
                    "summary": "lobbies for clearance",
                    "cites": [],
                }
            ]
        }
    if out is CohortOutput:
        return {
            "actions": [
                {
                    "label": "buy",
                    "endpoint": "cleared",
                    "direction": 0.8,
                    "magnitude": 0.4,
                    "probability": 0.7,
                },
                {
                    "label": "sell",
                    "endpoint": "cleared",
                    "direction": -0.5,
                    "magnitude": 0.6,
                    "probability": 0.3,
                },
            ],
            "attention": 0.7,
            "trust": 0.5,
        }
    if out is GovernanceOutput:
        return {
            "accepted": ["company_a#0", "ghost#3"],
            "rejected": [],
            "pressure": [{"endpoint": "cleared", "by": 0.2}, {"endpoint": "nowhere", "by": 1.0}],
            "ledger": [
                {
                    "endpoint": "remedies_offered",
                    "evidence": "supports",
                    "ref": "company_a#0",
                    "note": "offer",
                },
                {"endpoint": "unknown_ep", "status": "realized"},
            ],
            "decision": "continue",
            "reason": "steady",
            "branches": [],
            "forced_p_yes": 0.61,
        }
    if out is WorldOutput:
        return {
            "base_rate": 0.5,
            "hazard": 0.0,
            "actors": [
                {
                    "id": "company_a",
                    "name": "Company A",
                    "stance": 0.5,
                    "influence": 0.6,
                    "activity": 1.0,
                },
                {
                    "id": "Regulator R!",
                    "name": "Regulator R",
                    "stance": 0.0,
                    "influence": 0.9,
                    "activity": 1.0,
                },
            ],
            "cohorts": [
                {
                    "id": "investors",
                    "name": "Investors",
                    "size": 5000,
                    "attention": 0.5,
                    "trust": 0.5,
                    "sentiment": 0.1,
                }
            ],
            "relations": [
                {"source": "company_a", "target": "investors", "weight": 0.5},
                {"source": "ghost", "target": "investors", "weight": 0.5},
            ],
            "events": [],
            "hypotheses": [],
            "constraints": [],
        }
    if out is ReportOutput:
        return {
            "summary": "report",
            "claims": [
                {"text": "t0 ran to the deadline", "refs": [{"timeline": "t0", "tick": 1}]},
                {"text": "a timeline that never was", "refs": [{"timeline": "t0.9", "tick": 0}]},
            ],
        }
    raise AssertionError(out)


class Source:
    def __init__(self, fn: Any = script) -> None:
        self.model = ScriptedModel(fn)

    def for_role(self, role: str) -> Model:
        return self.model


def _run(card: Card, tmp_path: Path, source: Source | None = None, **models: Any) -> RunResult:
    config = RunConfig(
        card=card,
        policy=load_policy("branching"),
        seed=1,
        ticks=2,
        models=ModelConfig(model="scripted/model", cache="off", **models),
    )
    return anyio.run(
        lambda: run_card(
            config, tmp_path, fsync=False, overwrite=True, model_source=source or Source()
        )
    )


def test_semantically_invalid_content_is_dropped_with_a_traced_reason(
    demo_card: Card, tmp_path: Path
) -> None:
    result = _run(demo_card, tmp_path)
    assert verify_trace(result.trace).exit_code == 0
    trace = read_trace(result.trace)
    init = trace.first("world_initialized")
    assert init is not None
    problems = init.record.data.problems
    assert any("ghost->investors" in p for p in problems)
    assert [a["id"] for a in init.record.data.state["actors"]] == ["Regulator_R", "company_a"]
    reviews = [line.record.data for line in trace.of_type("review")]
    assert reviews and all("accepted unknown proposal 'ghost#3'" in r.reason for r in reviews)
    assert all("'nowhere' dropped" in r.reason for r in reviews)
    assert all("unknown endpoint 'unknown_ep' dropped" in r.reason for r in reviews)
    assert all(any(a.agent == "company_a" for a in r.accepted) for r in reviews)
    ended = [line.record.data for line in trace.of_type("timeline_ended")]
    assert [e.forced_p_yes for e in ended] == [0.61]


def test_cohorts_cost_one_call_each_and_members_are_sampled(
    demo_card: Card, tmp_path: Path
) -> None:
    result = _run(demo_card, tmp_path)
    trace = read_trace(result.trace)
    cohort_calls = [c.record for c in trace.of_type("llm_call") if c.record.data.role == "cohort"]
    ticks = {line.record.tick for line in trace.of_type("tick_committed")}
    assert len(cohort_calls) == len(ticks)  # one cohort, one call per tick, 5000 members
    updates = [p.data for p in trace.proposals() if p.data.role == "cohort"]
    assert updates
    for p in updates:
        counts = [int(part.split("×")[1]) for part in p.summary.split(": ")[1].split(", ")]
        assert sum(counts) == 50
        assert -0.5 <= p.direction <= 0.8


def test_report_claims_are_grounded_against_the_run(demo_card: Card, tmp_path: Path) -> None:
    trace = read_trace(_run(demo_card, tmp_path).trace)
    audit = trace.first("audit")
    assert audit is not None
    assert audit.record.data.report_grounding == "ungrounded"
    assert audit.record.data.ungrounded_refs == ["claim 1: unknown timeline t0.9"]


def test_leakage_is_recorded_as_hashes_or_aborts_the_run(demo_card: Card, tmp_path: Path) -> None:
    forbidden = tmp_path / "forbidden.txt"
    forbidden.write_text(f"# masked names\n{SECRET}\n")

    def leaky(request: ModelRequest) -> dict[str, Any]:
        reply = script(request)
        if request.output_type is ActorOutput:
            reply["proposals"][0]["summary"] = f"as {SECRET} did last year"
        return reply

    result = _run(demo_card, tmp_path / "rec", Source(leaky), forbidden_strings=forbidden)
    audit = read_trace(result.trace).first("audit")
    assert audit is not None and audit.record.data.leakage == "findings"
    findings = audit.record.data.leakage_findings
    digest = hashlib.sha256(SECRET.casefold().encode()).hexdigest()
    assert findings and all(f["sha256"] == digest for f in findings)
    # the actors' replies leak it, and it reaches the reviewer's prompt through their proposals
    assert {f["where"] for f in findings} == {"reply", "prompt"}
    assert {f["role"] for f in findings if f["where"] == "reply"} == {"actor"}
    audit_line = next(line.raw for line in read_trace(result.trace).of_type("audit"))
    assert SECRET.encode() not in audit_line

    with pytest.raises(LeakageError):
        _run(
            demo_card, tmp_path / "fail", Source(leaky), forbidden_strings=forbidden, leakage="fail"
        )
    failed = read_trace(
        tmp_path / "fail" / "merger-review__branching__scripted-model__ticks2__s1.jsonl"
    )
    assert failed.terminal is not None and failed.terminal.type == "run_failed"
    assert failed.terminal.data.kind == "LeakageError"


def test_each_simulation_prompt_sees_exactly_the_names_its_file_is_checked_against(
    demo_card: Card, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TEMPLATE_NAMES` is what a model route renders each simulation prompt with: a name
    outside it is refused when the file is read, and no name in it is missing at a call."""
    seen: dict[str, set[str]] = {}
    render = PromptRole.render

    def recording(self: PromptRole, **context: Any) -> tuple[str, str]:
        seen.setdefault(self.meta.output, set()).update(context)
        return render(self, **context)

    monkeypatch.setattr(PromptRole, "render", recording)
    _run(demo_card.model_copy(update={"seeds": None}), tmp_path / "model-world")
    _run(demo_card, tmp_path / "card-world")
    assert seen == {
        output: set(names)
        for output, names in TEMPLATE_NAMES.items()
        if output != "AssessmentOutput"  # a continued run's (tests/continuation)
    }
