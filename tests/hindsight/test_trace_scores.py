"""Forecast extraction, source precision and simulated pressure on a synthetic trace's records
(a file of them would not verify: its digests are made up), and on an engine's trace."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worldsim.scoring.hindsight import (
    HindsightGraph,
    causal_pressure,
    extract_forecast,
    simulated_pressure,
    source_precision,
    trace_records,
)
from worldsim.scoring.hindsight.forecast import RecordView, load_forecast_events

from .conftest import HINDSIGHT, RECORDS


@pytest.fixture
def views() -> list[RecordView]:
    """The synthetic records as a trace's effective records are read."""
    return [RecordView(kind, tl, tick, data, run="run-1") for kind, tl, tick, data in RECORDS]


def test_forecast_events_cover_observations_accepted_proposals_and_branches(
    views: list[RecordView], tmp_path: Path
) -> None:
    graph = extract_forecast(views)
    assert graph.card_id == "merger-review" and graph.run == "run-1"
    got = [(e.id, e.title, e.timeline, e.tick, e.mass, e.kind) for e in graph.events]
    assert got == [
        ("t0/0/obs/ev1", "Regulator R opens phase two review", "t0", 0, 0.6, "observation"),
        ("t0/0/company-a/0", "Company A offers divestment remedies", "t0", 0, 0.6, "proposal"),
        ("t0.1/0/branch", "Regulator R blocks the merger", "t0.1", 0, 0.4, "branch"),
        ("t0.1/1/regulator/0", "Regulator R sues to block the deal", "t0.1", 1, 0.4, "proposal"),
    ]
    # The rejected proposal ("rejects the remedies") is not an event.
    assert [e.date for e in graph.events][-1] == datetime(2026, 3, 16, tzinfo=UTC)
    assert [(link.source, link.target, link.relation) for link in graph.links] == [
        ("t0/0/company-a/0", "d2", "cites"),
        ("t0/0/company-a/0", "d9", "cites"),
        ("t0/0/obs/ev1", "t0/0/company-a/0", "informs"),
    ]
    saved = tmp_path / "graph.json"
    saved.write_text(graph.model_dump_json())
    assert [e.id for e in load_forecast_events(saved)] == [e.id for e in graph.events]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_the_forecast_graph_does_not_depend_on_how_timelines_interleave(
    data: st.DataObject, views: list[RecordView]
) -> None:
    """Timelines write the trace as they are scheduled; the graph must not see that order."""
    records = views
    head = [r for r in records if r.tl is None]
    queues = {tl: [r for r in records if r.tl == tl] for tl in {r.tl for r in records} - {None}}
    mixed = list(head)
    while any(queues.values()):
        tl = data.draw(st.sampled_from(sorted(tl for tl, q in queues.items() if q)))
        mixed.append(queues[tl].pop(0))
    assert extract_forecast(mixed) == extract_forecast(records)


def test_source_precision_counts_retrievals_and_citations_but_not_refusals(
    views: list[RecordView],
) -> None:
    result = source_precision(views, HindsightGraph.model_validate(HINDSIGHT))
    # accessed: d1, d2 (search) + d2, d9 (accepted cites) + d3 (rejected cites); "late" was
    # refused. Hindsight sources {d2, d3, d7}: 2 relevant of 4 accessed.
    assert result.accessed == ["d1", "d2", "d3", "d9"]
    assert result.relevant == ["d2", "d3"]
    assert result.precision == pytest.approx(0.5)
    empty = source_precision([], HindsightGraph.model_validate(HINDSIGHT))
    assert empty.precision is None


def test_simulated_pressure_is_mass_weighted_over_live_timelines(
    views: list[RecordView],
) -> None:
    points = simulated_pressure(views)
    # tick 0: only t0 committed: 0.6·0.7 / 0.6 = 0.7
    # tick 1: (0.6·0.8 + 0.4·0.1) / (0.6 + 0.4) = 0.52
    assert [(p.date.day, p.value) for p in points] == [
        (1, pytest.approx(0.7)),
        (16, pytest.approx(0.52)),
    ]


def test_causal_pressure_is_a_running_sum_with_mixed_and_neutral_at_zero() -> None:
    points = causal_pressure(HindsightGraph.model_validate(HINDSIGHT))
    # h1: −0.4·0.5 = −0.2; h2: +0.6·0.5 + 0 (mixed) = +0.3 → 0.1; h3: +1 → 1.1
    assert [p.value for p in points] == pytest.approx([-0.2, 0.1, 1.1])
    assert [p.date.day for p in points] == [2, 5, 30]


def test_real_engine_traces_give_branch_events_and_positive_ker(tmp_path: Path) -> None:
    """The extractor reads the engine's own fork records: hypotheses become branch events."""
    import anyio

    from worldsim.domain.cards import load_card
    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card

    root = Path(__file__).resolve().parents[2]
    card = load_card(root / "scenarios" / "merger-review.yaml")
    config = RunConfig(card=card, policy=load_policy("branching"), seed=6)
    result = anyio.run(lambda: run_card(config, tmp_path, fsync=False))
    assert result.forks > 0
    graph = extract_forecast(trace_records(result.trace))
    branches = [e for e in graph.events if e.kind == "branch"]
    assert len(branches) == result.forks
    assert all(e.timeline.count(".") >= 1 for e in branches)
