"""Hindsight graph validation: structural errors, quality thresholds and depth."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from worldsim.domain.errors import CardError
from worldsim.scoring.hindsight import HindsightGraph, Thresholds, load_hindsight, validate_graph
from worldsim.scoring.hindsight.graph import graph_size, longest_hops

from .conftest import HINDSIGHT


def _graph(data: dict[str, Any]) -> HindsightGraph:
    return HindsightGraph.model_validate(data)


def test_depth_counts_hops_on_the_longest_path_to_the_outcome() -> None:
    assert longest_hops(["a"], []) == {"a": 0}
    hops = longest_hops(["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("a", "c")])
    assert hops == {"a": 0, "b": 1, "c": 2, "d": 0}
    assert longest_hops(["a", "b"], [("a", "b"), ("b", "a")]) is None
    size = graph_size(_graph(HINDSIGHT))  # h1 → h2 → h3, h3 the outcome
    assert (size.events, size.depth, size.has_outcome) == (2, 2, True)
    data = copy.deepcopy(HINDSIGHT)
    data["events"].append({"id": "h4", "title": "Later"})
    data["edges"].append(
        {"source": "h3", "target": "h4", "relation": "causes", "strength": 1, "confidence": 1}
    )
    assert graph_size(_graph(data)).depth == 2  # the path past the outcome does not count
    data["events"][2]["is_outcome"] = False
    assert graph_size(_graph(data)).depth == 3  # no outcome: the longest path anywhere


def test_thresholds_are_warnings_unless_strict() -> None:
    graph = _graph(HINDSIGHT)
    report = validate_graph(graph)
    assert report.ok and (report.events, report.depth) == (2, 2)
    assert report.warnings == (
        "depth: the longest causal path to the outcome has 2 hop(s); at least 3 are needed "
        "(add causes of the causes)",
        "events: 2 event(s) besides the outcome; at least 10",
    )
    strict = validate_graph(graph, strict=True)
    assert strict.errors == report.warnings and not strict.ok
    assert validate_graph(graph, Thresholds(min_events=2, min_depth=2), strict=True).ok


def test_each_quality_threshold_is_checked() -> None:
    data = copy.deepcopy(HINDSIGHT)
    data["edges"] = [
        {"source": "h1", "target": "h2", "relation": "causes", "strength": 0.2, "confidence": 0.5}
    ]
    data["impacts"].append(
        {"event": "h1", "direction": "neutral", "magnitude": 0.4, "confidence": 1.0}
    )
    warnings = validate_graph(_graph(data), Thresholds(min_events=1)).warnings
    assert warnings == (
        "depth: the longest causal path to the outcome has 0 hop(s); at least 3 are needed "
        "(add causes of the causes)",
        "edges.0.confidence: 0.5 is below 0.6",
        "edges.0.strength: 0.2 is below 0.3",
        "impacts.4.magnitude: neutral impact 0.4 exceeds 0.3",
    )
    data["edges"] = []
    assert "edges: 0 edge(s), fewer than 1" in validate_graph(_graph(data)).warnings


def test_structural_problems_are_errors_even_when_not_strict() -> None:
    data = copy.deepcopy(HINDSIGHT)
    data["events"].append(dict(data["events"][0]))
    data["edges"].append(
        {"source": "h3", "target": "h1", "relation": "causes", "strength": 0.5, "confidence": 0.9}
    )
    data["edges"].append(
        {
            "source": "h1",
            "target": "ghost",
            "relation": "causes",
            "strength": 0.5,
            "confidence": 0.9,
        }
    )
    data["impacts"].append(
        {"event": "nowhere", "direction": "positive", "magnitude": 0.1, "confidence": 0.1}
    )
    errors = validate_graph(_graph(data)).errors
    assert errors == (
        "events: duplicate event id 'h1'",
        "edges.3.target: unknown event 'ghost'",
        "impacts.4.event: unknown event 'nowhere'",
        "edges: the causal graph contains a cycle",
    )


def test_schema_problems_name_the_file_and_field(tmp_path: Path) -> None:
    data = copy.deepcopy(HINDSIGHT)
    data["edges"][1]["relation"] = "blames"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CardError, match=r"g\.json: field 'edges\.1\.relation'"):
        load_hindsight(path)
    data = copy.deepcopy(HINDSIGHT)
    data["events"][0]["date"] = "2026-03-02T10:00:00"
    path.write_text(json.dumps(data))
    with pytest.raises(CardError, match=r"field 'events\.0\.date'.*no timezone"):
        load_hindsight(path)
