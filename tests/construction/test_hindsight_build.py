"""The backward pipeline: a scripted builder whose first graph is too shallow is told which gates
fail and fixes it; the offline rules' graph that cannot pass is written as graph_built: false
and left out of scoring; edits that cannot apply are refused with their reason."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import DEMO_CARD, ROOT, invoke
from worldsim.build.annotate import annotation_sheet, apply_annotations
from worldsim.build.calls import BuildLog
from worldsim.build.graph import (
    GRAPH_TOOLS,
    OUTCOME_ID,
    WorkingGraph,
    gate_failures,
    tool_handler,
)
from worldsim.build.hindsight import build_hindsight
from worldsim.build.policy import GraphGates, QualityPolicy
from worldsim.domain.cards import Card, EvidenceDoc, load_card
from worldsim.domain.contracts import ModelRequest
from worldsim.domain.labels import Label
from worldsim.domain.outputs import GraphEdit, GraphEditsOutput, HindsightOutput
from worldsim.scoring.hindsight.graph import (
    HindsightEvent,
    graph_json,
    graph_size,
    load_hindsight,
    validate_graph,
)
from worldsim.testing import ScriptedModel, StubServer

START = datetime(2027, 1, 20, tzinfo=UTC)


def _card(n_docs: int) -> Card:
    card = load_card(DEMO_CARD)
    docs = tuple(
        EvidenceDoc(
            id=f"d{i:02d}",
            published_at=START + timedelta(days=i),
            title=f"Regulator step {i} on the merger review",
            text=f"Report {i} on the merger of Company A and Company B.",
            stance=0.5,
        )
        for i in range(n_docs)
    )
    return card.model_copy(update={"evidence": docs})


def _build_demo(*args: str | Path) -> Any:
    """``worldsim build hindsight`` of the demo card with its shipped label."""
    return invoke("build", "hindsight", DEMO_CARD, "--label", ROOT / "scenarios" / "labels", *args)


LABEL = Label(card_id="merger-review", outcome="yes", resolved_at=datetime(2027, 3, 24, tzinfo=UTC))


def _events(n: int) -> list[GraphEdit]:
    return [
        GraphEdit(
            op="propose_event",
            id=f"e{i}",
            title=f"Step {i}",
            date=(START + timedelta(days=2 * i)).isoformat(),
            source_ids=[f"d{2 * i:02d}", f"d{2 * i + 1:02d}"],
        )
        for i in range(n)
    ]


def _edge(source: str, target: str, confidence: float = 0.8) -> GraphEdit:
    return GraphEdit(
        op="add_edge", source=source, target=target, strength=0.6, confidence=confidence
    )


def _script(request: ModelRequest) -> dict[str, Any]:
    if request.output_type is HindsightOutput:
        return {"explanation": "The steps led to the clearance.", "sources": ["d00"]}
    assert request.output_type is GraphEditsOutput
    if request.site.index == 1:  # too shallow: every event straight into the outcome
        edits = [*_events(11), *(_edge(f"e{i}", OUTCOME_ID) for i in range(11))]
        edits.append(_edge("e0", "e1", confidence=0.2))  # too weak: left out
        edits.append(GraphEdit(op="propose_event", id="ghost", title="x", source_ids=["zz"]))
    else:  # told what failed: chain the causes
        text = request.chat()[1].content
        assert "depth" in text and "would close a cycle" not in text
        assert "cites documents it was not shown: zz" in text
        edits = [_edge("e0", "e1"), _edge("e1", "e2"), _edge("e2", "e3")]
    return GraphEditsOutput(edits=edits).model_dump(mode="json")


def _build(card: Card, models: dict[str, Any], tmp_path: Path, **gates: Any) -> Any:
    policy = QualityPolicy(graph=GraphGates(**gates))
    log = BuildLog(tmp_path / "g.build.jsonl")
    graph = anyio.run(lambda: build_hindsight(card, LABEL, models, policy, log))
    log.write()
    return graph, log


def test_a_too_shallow_graph_is_fed_back_and_fixed(tmp_path: Path) -> None:
    model = ScriptedModel(_script)
    graph, log = _build(_card(22), {"hindsight": model, "graph_builder": model}, tmp_path)
    assert graph.graph_built and graph.failed_gates == ()
    assert graph_size(graph).depth == 4  # e0 → e1 → e2 → e3 → outcome
    assert len(graph.sources) == 22 and len(graph.events) == 12
    assert all(e.confidence >= 0.6 for e in graph.edges)  # the weak edge is not included
    assert graph.construction["rounds"] == 2 and not graph.construction["offline_rules"]
    rounds = [line for line in log.lines if line["type"] == "round"]
    assert rounds[0]["failed_gates"] and "depth" in rounds[0]["failed_gates"][0]
    assert rounds[0]["weak_edges_left_out"] and rounds[1]["failed_gates"] == []
    calls = [line for line in log.lines if line["type"] == "llm_call"]
    assert [c["round"] for c in calls] == [0, 1, 2]


def test_a_graph_that_cannot_pass_is_written_not_built_and_left_out_of_scoring(
    tmp_path: Path,
) -> None:
    out = tmp_path / "hindsight" / "merger-review.json"
    out.parent.mkdir()
    labels = ROOT / "scenarios" / "labels"
    built = _build_demo("-o", out)
    assert built.code == 0, built.err
    assert "graph_built false" in built.out and "failed gate: sources" in built.out
    graph = load_hindsight(out)
    assert not graph.graph_built
    assert any(g.startswith("sources") for g in graph.failed_gates)
    assert graph.construction is not None and graph.construction["offline_rules"]
    log = [json.loads(line) for line in out.with_name("merger-review.build.jsonl").open()]
    assert log[0]["type"] == "build_started" and log[-1]["type"] == "build_completed"
    # scoring a run of the card against this folder leaves the graph out, and says why
    run = invoke("run", DEMO_CARD, "--out", tmp_path / "runs", "--ticks", "2")
    assert run.code == 0, run.err
    traces = sorted((tmp_path / "runs").glob("*.jsonl"))
    report = tmp_path / "score.json"
    scored = invoke(
        "score", *traces, "--labels", labels, "--hindsight", out.parent, "--json", report
    )
    assert scored.code == 0, scored.err
    coverage = json.loads(report.read_text(encoding="utf-8"))["axes"]["coverage"]
    assert coverage["cards_with_graph"] == []
    assert coverage["graphs_not_built"][0]["card_id"] == "merger-review"
    assert "left out (graph_built false): merger-review" in scored.out
    # the single-graph commands that score a run leave it out as well: they refuse it
    refusal = f"error: {out}: field 'graph_built': graph_built: false, so scoring leaves it out"
    for command in ("ker", "sources"):
        refused = invoke("hindsight", command, traces[0], "--hindsight", out)
        assert refused.code == 2 and refused.err.startswith(refusal), refused.err
    strict = invoke("hindsight", "validate", out, "--strict")
    assert strict.code == 2 and "graph_built: false" in strict.err
    again = _build_demo("-o", out)
    assert again.code == 2
    assert again.err.strip() == f"error: {out}: exists; use --force to replace it"


def test_the_gates_and_validate_count_events_and_depth_alike(tmp_path: Path) -> None:
    working = _working(10)
    chain = [f"e{i}" for i in range(10)] + [OUTCOME_ID]
    assert working.apply_all([_edge(a, b) for a, b in itertools.pairwise(chain)]) == []
    built, _ = working.graph(GraphGates(), card_id="c", question="q", construction={})
    assert gate_failures(built, GraphGates()) == []
    assert validate_graph(built, strict=True).ok
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(
        annotation_sheet(built).replace("e9,Step 9,2027-02-07,d18 d19,,,,,,", "e9,Step 9,,,no,,,,,")
    )
    cut = apply_annotations(built, sheet, GraphGates())
    assert not cut.graph_built
    size_gates = [g for g in cut.failed_gates if g.startswith(("depth", "events"))]
    assert size_gates == [
        "depth: the longest causal path to the outcome has 0 hop(s); at least 3 are needed "
        "(add causes of the causes)",
        "events: 9 event(s) besides the outcome; at least 10",
    ]
    path = tmp_path / "c.json"
    path.write_bytes(graph_json(cut))
    strict = invoke("hindsight", "validate", path, "--strict")
    assert strict.code == 2
    for gate in size_gates:
        assert f"error: {path}: {gate}\n" in strict.err
    loose = invoke("hindsight", "validate", path, "--json")
    assert (json.loads(loose.out)["events"], json.loads(loose.out)["depth"]) == (9, 0)


def _working(n: int) -> WorkingGraph:
    outcome = HindsightEvent(id=OUTCOME_ID, title="Resolved", is_outcome=True)
    graph = WorkingGraph(outcome=outcome, sources=frozenset(f"d{i:02d}" for i in range(2 * n)))
    assert graph.apply_all(_events(n)) == []
    return graph


def test_edits_that_cannot_apply_are_refused_with_their_reason() -> None:
    graph = _working(3)
    refused = graph.apply_all(
        [
            _edge("e0", "e1"),
            _edge("e1", "e0"),
            _edge("e2", "e2"),
            _edge("outcome", "e0"),
            _edge("e0", "nowhere"),
            GraphEdit(op="delete_event", id=OUTCOME_ID),
            GraphEdit(op="record_impact", event="nowhere"),
            GraphEdit(op="delete_edge", source="e2", target="e0"),
        ]
    )
    assert [r.split(": ", 1)[1] for r in refused] == [
        "e1 -> e0 would close a cycle",
        "an event cannot cause itself",
        "the outcome causes nothing in its own graph",
        "no event 'nowhere'",
        "the outcome event stays",
        "no event 'nowhere' to record an impact for",
        "no edge e2 -> e0",
    ]
    assert graph.apply(GraphEdit(op="delete_event", id="e0")) is None
    assert list(graph.edges) == [] and "e0" not in graph.events


@given(st.integers(1, 12))
def test_a_chain_into_the_outcome_has_one_hop_per_edge(n: int) -> None:
    graph = _working(n)
    chain = [f"e{i}" for i in range(n)] + [OUTCOME_ID]
    assert graph.apply_all([_edge(a, b) for a, b in itertools.pairwise(chain)]) == []
    built, _ = graph.graph(GraphGates(), card_id="c", question="q")
    assert graph_size(built).depth == n
    failed = gate_failures(
        built, GraphGates(min_hops_to_outcome=n, min_events=n, min_sources=2 * n)
    )
    assert failed == []
    assert gate_failures(built, GraphGates(min_hops_to_outcome=n + 1, min_events=n, min_sources=0))


def test_a_bad_gates_file_is_refused_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "gates.yaml"
    bad.write_text("graph:\n  min_events: -1\n", encoding="utf-8")
    done = _build_demo("-o", tmp_path / "g.json", "--gates", bad)
    assert done.code == 2 and "graph.min_events" in done.err
    assert not (tmp_path / "g.json").exists()


@pytest.mark.parametrize("missing", ["label"])
def test_a_card_without_a_label_is_refused(tmp_path: Path, missing: str) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "other.yaml").write_text("card_id: other\noutcome: yes\n", encoding="utf-8")
    done = invoke("build", "hindsight", DEMO_CARD, "--label", labels, "-o", tmp_path / "g.json")
    assert done.code == 2 and "no label for card 'merger-review'" in done.err


def test_a_build_on_a_model_route_is_cached_like_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with StubServer(seed=4) as server:
        monkeypatch.setenv("STUB_BASE_URL", server.base_url)
        monkeypatch.setenv("STUB_API_KEY", "stub-key")
        args = [
            "build",
            "hindsight",
            DEMO_CARD,
            "--label",
            ROOT / "scenarios" / "labels",
            "--model",
            "stub/test-model",
            "--cache-dir",
            tmp_path / "cache",
        ]
        first = invoke(*args, "-o", tmp_path / "a.json")
        assert first.code == 0, first.err
        asked = server.request_count
        assert asked >= 2  # the explanation and at least one round of the builder
        again = invoke(*args, "-o", tmp_path / "b.json")
        assert again.code == 0, again.err
        assert server.request_count == asked  # every call came from the cache
    a, b = load_hindsight(tmp_path / "a.json"), load_hindsight(tmp_path / "b.json")
    assert a == b
    assert (
        a.construction is not None
        and a.construction["routes"]["graph_builder"] == "stub/test-model"
    )
    log = [json.loads(line) for line in (tmp_path / "a.build.jsonl").open()]
    calls = [e for e in log if e["type"] == "llm_call"]
    assert calls and all("stub-key" not in json.dumps(c) for c in calls)
    assert all(c.get("messages") for c in calls)  # the prompts are recorded


def test_a_missing_database_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    done = _build_demo("--db", tmp_path / "nowhere.sqlite", "-o", out)
    assert done.code == 2 and "evidence database not found" in done.err
    assert list(tmp_path.iterdir()) == []


def test_the_builder_tools_apply_each_edit_at_once_and_say_why_not() -> None:
    graph = _working(2)
    calls: list[dict[str, Any]] = []
    handle = tool_handler(graph, calls)

    async def use() -> list[dict[str, Any]]:
        answers = [
            await handle(
                "add_edge",
                json.dumps({"source": "e0", "target": "e1", "strength": 0.5, "confidence": 0.9}),
            ),
            await handle(
                "add_edge",
                json.dumps({"source": "e1", "target": "e0", "strength": 0.5, "confidence": 0.9}),
            ),
            await handle("propose_event", json.dumps({"id": "e9", "title": "x", "source_ids": []})),
            await handle("rename_event", "{}"),
        ]
        return [json.loads(a) for a in answers]

    answers = anyio.run(use)
    assert answers[0] == {"applied": True} and ("e0", "e1") in graph.edges
    assert answers[1] == {"refused": "e1 -> e0 would close a cycle"}
    assert "source_ids" in answers[2]["refused"]
    assert answers[3]["refused"].startswith("no tool 'rename_event'")
    assert [c["tool"] for c in calls] == ["add_edge", "add_edge", "propose_event", "rename_event"]
    assert {spec.name for spec in GRAPH_TOOLS} == {
        "propose_event",
        "add_edge",
        "record_impact",
        "delete_event",
        "delete_edge",
    }
    assert all(spec.openai()["function"]["parameters"]["type"] == "object" for spec in GRAPH_TOOLS)


def test_a_build_stopped_by_a_model_error_logs_the_failed_call_and_why(tmp_path: Path) -> None:
    from worldsim.build.calls import run_build
    from worldsim.domain.config import ModelConfig
    from worldsim.domain.errors import ModelError

    log = BuildLog(tmp_path / "build.jsonl")
    log.start("hindsight", {})

    async def body(models: Any) -> None:
        assert set(models) == {"hindsight"}
        raise ModelError("the route gave no reply", call={"role": "hindsight", "route": "x/y"})

    with pytest.raises(ModelError):
        anyio.run(lambda: run_build(ModelConfig(), ["hindsight"], log, body))
    lines = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["build_started", "llm_call", "build_failed"]
    assert lines[1] == {"type": "llm_call", "role": "hindsight", "route": "x/y", "failed": True}
    assert lines[2]["error"] == "the route gave no reply"


@pytest.mark.parametrize(
    ("label", "message"),
    [
        (
            "card_id: merger-review\noutcome: maybe\nresolved_at: 2027-03-24T00:00:00Z\n",
            "outcome 'maybe' of card 'merger-review' is none of its endpoints",
        ),
        (  # the label, not the evidence, is at fault: it resolves before the card's as_of
            "card_id: merger-review\noutcome: yes\nresolved_at: 2026-08-01T00:00:00Z\n",
            "merger-review.yaml: field 'resolved_at': resolved_at 2026-08-01T00:00:00Z is before "
            "the as_of of card 'merger-review' (2027-01-04T00:00:00Z)",
        ),
    ],
)
def test_a_label_the_graph_cannot_explain_is_refused_and_nothing_is_written(
    tmp_path: Path, label: str, message: str
) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "merger-review.yaml").write_text(label, encoding="utf-8")
    before = sorted(tmp_path.rglob("*"))
    done = invoke("build", "hindsight", DEMO_CARD, "--label", labels, "-o", tmp_path / "g.json")
    assert done.code == 2, done.err
    assert message in done.err and "Traceback" not in done.err
    assert sorted(tmp_path.rglob("*")) == before


def test_evidence_on_another_topic_is_refused_naming_db(tmp_path: Path) -> None:
    db = tmp_path / "corpus.sqlite"
    assert (
        invoke(
            "gateway", "ingest", ROOT / "scenarios" / "corpus" / "articles.jsonl", "--db", db
        ).code
        == 0
    )
    done = _build_demo("--db", db, "-o", tmp_path / "g.json")
    assert done.code == 2, done.err
    assert (
        "field 'db': no document on card 'merger-review''s topic was published before" in done.err
    )
    assert not (tmp_path / "g.json").exists()
