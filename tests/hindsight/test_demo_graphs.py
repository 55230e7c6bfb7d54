"""The demo hindsight graphs shipped in scenarios/hindsight/ pass strict validation; the demo
cards hold distractors their graphs do not cite, so source precision can fall below 1; the
binary demo cards have market prices for the pressure chart."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.hindsight import key_events, load_hindsight, validate_graph
from worldsim.scoring.hindsight.evidence import source_precision
from worldsim.scoring.hindsight.forecast import trace_records
from worldsim.sim.session import run_card

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


@pytest.mark.parametrize("card_id", CARDS)
def test_every_demo_card_holds_distractors_its_graph_does_not_cite(card_id: str) -> None:
    card = load_card(DEMO.parent / f"{card_id}.yaml")
    graph = load_hindsight(DEMO / f"{card_id}.json")
    assert isinstance(card.evidence, tuple)
    before = {doc.id for doc in card.evidence if doc.published_at < card.as_of}
    assert len(before - graph.sources) >= 2


def test_source_precision_tells_a_run_that_read_a_distractor(tmp_path: Path) -> None:
    card = load_card(DEMO.parent / "merger-review.yaml")
    config = RunConfig(card=card, policy=load_policy("branching"), seed=0)
    result = anyio.run(lambda: run_card(config, tmp_path, fsync=False))
    score = source_precision(
        trace_records(result.trace), load_hindsight(DEMO / "merger-review.json")
    )
    assert score.precision is not None and 0 < score.precision < 1


@pytest.mark.parametrize("card_id", [c for c in CARDS if c != "award-best-picture"])
def test_every_binary_demo_card_has_a_market_price_file(card_id: str) -> None:
    card = load_card(DEMO.parent / f"{card_id}.yaml")
    rows = (DEMO.parent / "markets" / f"{card_id}.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "date,price" and len(rows) >= 5
    dates = [row.split(",")[0] for row in rows[1:]]
    assert dates == sorted(dates) and dates[0] >= card.as_of.date().isoformat()
    assert all(0 <= float(row.split(",")[1]) <= 1 for row in rows[1:])
