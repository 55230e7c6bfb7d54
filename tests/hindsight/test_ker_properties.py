"""Invariants of the KER matcher over arbitrary small graphs and forecasts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from worldsim.scoring.hindsight import ForecastEvent, HindsightGraph, key_event_recall
from worldsim.scoring.hindsight.ker import PAIR_SCORE_MIN

WORDS = ["merger", "review", "remedy", "regulator", "approval", "court", "vote", "delay"]
titles = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)
days = st.one_of(st.none(), st.integers(min_value=1, max_value=28))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[HindsightGraph, list[ForecastEvent]]:
    n = draw(st.integers(min_value=1, max_value=8))
    events = []
    impacts = []
    for i in range(n):
        day = draw(days)
        events.append(
            {
                "id": f"h{i}",
                "title": draw(titles) or "x",
                "is_outcome": draw(st.booleans()),
                "date": None if day is None else f"2026-03-{day:02d}",
            }
        )
        impacts.append(
            {
                "event": f"h{i}",
                "direction": "positive",
                "magnitude": draw(st.floats(0, 1)),
                "confidence": draw(st.floats(0, 1)),
            }
        )
    forecast = []
    for j in range(draw(st.integers(min_value=0, max_value=10))):
        day = draw(days)
        forecast.append(
            ForecastEvent.model_validate(
                {
                    "id": f"f{j}",
                    "title": draw(titles),
                    "date": None if day is None else f"2026-03-{day:02d}T12:00:00Z",
                }
            )
        )
    graph = HindsightGraph.model_validate({"events": events, "impacts": impacts})
    return graph, forecast


@settings(max_examples=150, deadline=None)
@given(scenario=scenarios(), window=st.one_of(st.none(), st.floats(0, 30)))
def test_matching_is_one_to_one_bounded_and_respects_its_rules(
    scenario: tuple[HindsightGraph, list[ForecastEvent]], window: float | None
) -> None:
    graph, forecast = scenario
    report = key_event_recall(graph, forecast, date_window_days=window)
    h_ids = [m.hindsight for m in report.matches]
    f_ids = [m.forecast for m in report.matches]
    assert len(set(h_ids)) == len(h_ids) and len(set(f_ids)) == len(f_ids)
    outcomes = {ev.id for ev in graph.events if ev.is_outcome}
    assert not outcomes & set(h_ids)
    assert all(m.score >= PAIR_SCORE_MIN - 1e-12 for m in report.matches)
    by_id = {ev.id: ev for ev in graph.events}
    dates = {f.id: f.date for f in forecast}
    for m in report.matches:
        h_date, f_date = by_id[m.hindsight].date, dates[m.forecast]
        if window is not None and h_date is not None and f_date is not None:
            assert abs((h_date - f_date).total_seconds()) <= window * 86400
    assert len(report.key_events) <= 5
    assert set(report.matched_key_events) <= set(report.key_events)
    if report.ker is None:
        assert not forecast or not report.key_events
    else:
        assert 0.0 <= report.ker <= 1.0
        # Without masses every kept pair counts 1, and assigned pairs are kept pairs.
        assert report.mass_weighted_recall is not None
        assert report.ker <= report.mass_weighted_recall <= 1.0
