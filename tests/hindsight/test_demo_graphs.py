"""The demo hindsight graphs shipped in scenarios/hindsight/ pass strict validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsim.scoring.hindsight import key_events, load_hindsight, validate_graph

DEMO = Path(__file__).resolve().parents[2] / "scenarios" / "hindsight"
CARDS = [
    "merger-review",
    "central-bank-march",
    "award-best-picture",
    "product-launch",
    "election-runoff",
    "space-launch",
]


@pytest.mark.parametrize("card_id", CARDS)
def test_demo_graph_is_complete_and_strictly_valid(card_id: str) -> None:
    graph = load_hindsight(DEMO / f"{card_id}.json")
    report = validate_graph(graph, strict=True)
    assert report.ok, report.errors
    assert graph.card_id == card_id
    assert len(graph.events) >= 10 and report.depth >= 3
    assert sum(ev.is_outcome for ev in graph.events) == 1
    assert len(key_events(graph)) == 5
    assert all(ev.date is not None and ev.source_ids for ev in graph.events)
