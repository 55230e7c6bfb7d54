"""Key-event recall against examples worked by hand, one rule at a time."""

from __future__ import annotations

import math
from typing import Any

import pytest

from worldsim.scoring.hindsight import ForecastEvent, HindsightGraph, key_event_recall, key_events
from worldsim.scoring.hindsight.ker import bm25_scores, token_f1, tokens


def _graph(events: list[dict[str, Any]], impacts: list[dict[str, Any]] = ()) -> HindsightGraph:
    return HindsightGraph.model_validate({"events": events, "impacts": list(impacts)})


def _f(fid: str, title: str, **extra: Any) -> ForecastEvent:
    return ForecastEvent.model_validate({"id": fid, "title": title, **extra})


def test_tokens_lowercase_alnum_longer_than_two_minus_stopwords_as_a_set() -> None:
    text = "The Merger, AND the merger-review of A1 & B2 is for THIS year 2026"
    # the/and/for/this are stop words; of, a1, b2, is are too short; merger appears twice.
    assert tokens(text) == {"merger", "review", "year", "2026"}


def test_token_f1_uses_forecast_set_for_precision_and_hindsight_set_for_recall() -> None:
    a = frozenset({"alpha", "beta", "gamma", "delta"})  # hindsight
    b = frozenset({"alpha", "beta", "omega"})  # forecast
    # P = 2/3, R = 2/4, F1 = 2·(2/3)(1/2) / (2/3 + 1/2) = (2/3) / (7/6) = 4/7
    assert token_f1(a, b) == pytest.approx(4 / 7)
    assert token_f1(a, frozenset()) == 0.0 and token_f1(frozenset(), b) == 0.0


def test_bm25_over_token_sets_by_hand() -> None:
    docs = [frozenset({"x", "y"}), frozenset({"x", "z", "w", "v"}), frozenset({"u", "t", "s"})]
    scores = bm25_scores(frozenset({"x", "z"}), docs)
    # N = 3, avgdl = (2 + 4 + 3)/3 = 3.
    # idf(x), df 2: ln(1 + (3 − 2 + 0.5)/(2 + 0.5)) = ln 1.6
    # idf(z), df 1: ln(1 + (3 − 1 + 0.5)/(1 + 0.5)) = ln(8/3)
    # doc 0: 1 − 0.75 + 0.75·2/3 = 0.75; (1.5 + 1)/(1 + 1.5·0.75) = 2.5/2.125 = 20/17
    # doc 1: 1 − 0.75 + 0.75·4/3 = 1.25; 2.5/(1 + 1.5·1.25) = 2.5/2.875 = 20/23
    assert scores[0] == pytest.approx(math.log(1.6) * 20 / 17)
    assert scores[1] == pytest.approx((math.log(1.6) + math.log(8 / 3)) * 20 / 23)
    assert scores[2] == 0.0
    assert bm25_scores(frozenset({"x"}), []) == []


GRAPH_A = _graph(
    [
        {"id": "H0", "title": "alpha beta"},
        {"id": "H1", "title": "alpha gamma"},
        {"id": "H2", "title": "delta epsilon", "is_outcome": True},
        {"id": "H3", "title": "zeta eta"},
    ],
    [
        {"event": "H0", "direction": "positive", "magnitude": 0.5, "confidence": 0.4},
        {"event": "H1", "direction": "negative", "magnitude": 0.9, "confidence": 0.2},
        {"event": "H1", "direction": "negative", "magnitude": 0.5, "confidence": 0.5},
        {"event": "H2", "direction": "positive", "magnitude": 1.0, "confidence": 1.0},
    ],
)


def test_threshold_forecast_tie_break_key_events_and_all_figures() -> None:
    forecast = [_f("F0", "alpha beta", mass=0.3), _f("F1", "alpha beta", mass=0.7)]
    report = key_event_recall(GRAPH_A, forecast)
    # Texts are "title. " so every hindsight set has 2 tokens: avgdl 2, BM25 weight 2.5/2.5 = 1.
    # Reverse, F0 or F1 querying the 4 hindsight texts (N = 4):
    #   idf(alpha), df 2 = ln(1 + 2.5/2.5) = ln 2; idf(beta), df 1 = ln(1 + 3.5/1.5) = ln(10/3)
    #   H0: ln 2 + ln(10/3) = ln(20/3) (the maximum) → 1;  H1: ln 2 / ln(20/3) = 0.365368
    # Pairs: (H0, Fj) = 0.6·1 + 0.4·F1 1 = 1.0, kept.
    #        (H1, Fj) = 0.6·0.365368 + 0.4·(P 1/2, R 1/2 → F1 1/2) = 0.419221 < 0.45, dropped.
    # Greedy over (score, h, f) descending: (H0, F1) before (H0, F0) → H0 ↔ F1.
    assert [(m.hindsight, m.forecast) for m in report.matches] == [("H0", "F1")]
    assert report.matches[0].score == pytest.approx(1.0)
    # Key scores: H0 0.5·0.4 = 0.2 (≥ 0.2, kept); H1 max(0.9·0.2, 0.5·0.5) = 0.25;
    # H2 is the outcome; H3 has no impact. Order by (score, index) descending: H1, H0.
    assert report.key_events == ["H1", "H0"]
    assert report.matched_key_events == ["H0"]
    assert report.ker == pytest.approx(1 / 2)
    # Precision 1 match / 2 forecast events; recall 1 / 3 non-outcome events;
    # F1 = 2·(1/2)(1/3)/(1/2 + 1/3) = (1/3)/(5/6) = 0.4.
    assert report.event_precision == pytest.approx(0.5)
    assert report.event_recall == pytest.approx(1 / 3)
    assert report.event_f1 == pytest.approx(0.4)
    # Mass-weighted: H0 is matchable by F0 (0.3) and F1 (0.7) → 0.7; H1 by none → 0.
    # (0.7 + 0) / 2 = 0.35
    assert report.mass_weighted_recall == pytest.approx(0.35)


def test_h1_pair_score_is_just_below_the_threshold() -> None:
    reverse = math.log(2) / math.log(20 / 3)
    assert 0.6 * reverse + 0.4 * 0.5 == pytest.approx(0.419221, abs=1e-6)


GRAPH_B = _graph(
    [
        {"id": "H0", "title": "kappa lambda"},
        {"id": "H1", "title": "kappa lambda"},
        {"id": "H2", "title": "sigma tau", "date": "2026-01-10"},
    ],
    [
        {"event": e, "direction": "positive", "magnitude": 1.0, "confidence": 0.5}
        for e in ("H0", "H1", "H2")
    ],
)
FORECAST_B = [
    *(_f(f"F{j}", "kappa lambda") for j in range(6)),
    _f("F6", "sigma tau", date="2026-01-18T00:00:00Z"),
    _f("F7", "nothing here"),
]


def test_candidates_hindsight_tie_break_date_window_and_zero_reverse() -> None:
    report = key_event_recall(GRAPH_B, FORECAST_B, date_window_days=7)
    # F0..F5 are identical: for H0 and H1 every one scores the same BM25, so the 5 candidates
    # are F0..F4 (ties to the lower index); F5 is never a candidate.
    # Reverse: F0..F5 score H0 and H1 equally → both 1; F1 token = 1 → every pair scores 1.0.
    # F7 shares no token with any hindsight text: its maximum is 0, all its reverse scores 0.
    # Greedy over (score, h, f) descending: (H1, F4) first, then H0 takes F3 (F4 is used).
    # H2 ↔ F6 would score 1.0, but the dates are 8 days apart > 7.
    assert [(m.hindsight, m.forecast) for m in report.matches] == [("H1", "F4"), ("H0", "F3")]
    assert report.key_events == ["H2", "H1", "H0"]  # all 0.5: by index descending
    assert report.ker == pytest.approx(2 / 3)
    # Precision 2/8, recall 2/3, F1 = 2·(1/4)(2/3)/(1/4 + 2/3) = (1/3)/(11/12) = 4/11
    assert report.event_f1 == pytest.approx(4 / 11)
    # No mass given: a matchable key event counts 1 → (0 + 1 + 1)/3
    assert report.mass_weighted_recall == pytest.approx(2 / 3)


@pytest.mark.parametrize("window", [None, 8.0])
def test_a_wider_or_no_date_window_admits_the_pair(window: float | None) -> None:
    report = key_event_recall(GRAPH_B, FORECAST_B, date_window_days=window)
    assert ("H2", "F6") in [(m.hindsight, m.forecast) for m in report.matches]
    assert report.ker == pytest.approx(1.0)


def test_key_events_are_the_top_five_by_score_then_index_descending() -> None:
    scores = [0.3, 0.3, 0.5, 0.2, 0.25, 0.3, 0.19]
    graph = _graph(
        [{"id": f"E{i}", "title": f"event {i}"} for i in range(len(scores))]
        + [{"id": "OUT", "title": "outcome", "is_outcome": True}],
        [
            {"event": f"E{i}", "direction": "mixed", "magnitude": 1.0, "confidence": s}
            for i, s in enumerate(scores)
        ]
        + [{"event": "OUT", "direction": "positive", "magnitude": 1.0, "confidence": 1.0}],
    )
    # Eligible (≥ 0.2, not outcome): E0 .3, E1 .3, E2 .5, E3 .2, E4 .25, E5 .3 (E6 .19 is not).
    # (score, index) descending: E2, E5, E1, E0, E4, E3 → the first five.
    assert [e.id for e in key_events(graph)] == ["E2", "E5", "E1", "E0", "E4"]


def test_ker_is_null_without_forecast_events_or_key_events() -> None:
    assert key_event_recall(GRAPH_A, []).ker is None
    assert key_event_recall(GRAPH_A, []).event_precision is None
    no_keys = _graph([{"id": "H0", "title": "alpha beta"}])
    report = key_event_recall(no_keys, [_f("F0", "alpha beta")])
    assert report.ker is None and report.mass_weighted_recall is None
    assert report.event_recall == 1.0
