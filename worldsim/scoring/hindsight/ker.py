"""Key-event recall (KER): did the simulation produce the events that mattered?

The WorldReasoner matcher, rule for rule (docs/hindsight.md walks through each):

* tokens: lower-case ``[a-z0-9]+`` runs longer than two characters, minus a few stop words,
  as a set; an event's text is ``"{title}. {description}"``;
* token F1 of hindsight set A and forecast set B: P = |A∩B|/|B|, R = |A∩B|/|A|;
* BM25 (k1 = 1.5, b = 0.75, idf = ln(1 + (N − df + 0.5)/(df + 0.5))) over token sets;
* reverse score: a forecast text queries all hindsight texts, normalised by its maximum;
* candidates: the 5 best forecast events for each non-outcome hindsight text;
* pair score 0.6·reverse + 0.4·F1, kept at ≥ 0.45 and within the date window;
* greedy one-to-one assignment over (score, hindsight index, forecast index) descending;
* key events: non-outcome events with max impact magnitude × confidence ≥ 0.2, top 5.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from worldsim.domain.errors import ConfigError
from worldsim.scoring.hindsight import DEFAULT_DATE_WINDOW_DAYS

if TYPE_CHECKING:
    from worldsim.scoring.hindsight.forecast import ForecastEvent
    from worldsim.scoring.hindsight.graph import HindsightEvent, HindsightGraph

__all__ = [
    "CANDIDATES_PER_EVENT",
    "DEFAULT_DATE_WINDOW_DAYS",
    "KEY_EVENT_LIMIT",
    "KEY_SCORE_MIN",
    "PAIR_SCORE_MIN",
    "KerReport",
    "Match",
    "bm25_scores",
    "key_event_recall",
    "key_events",
    "parse_date_window",
    "token_f1",
    "tokens",
]

STOPWORDS = frozenset({"the", "and", "for", "with", "that", "this"})
BM25_K1 = 1.5
BM25_B = 0.75
CANDIDATES_PER_EVENT = 5
REVERSE_WEIGHT = 0.6
F1_WEIGHT = 0.4
PAIR_SCORE_MIN = 0.45
KEY_SCORE_MIN = 0.2
KEY_EVENT_LIMIT = 5

_WORD = re.compile(r"[a-z0-9]+")


def parse_date_window(text: str) -> float | None:
    """Read a ``--date-window`` value: a number of days (zero or more), or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        days = float(text)
    except ValueError:
        raise ConfigError(
            f"expected a number of days or 'none', got {text!r}", field="--date-window"
        ) from None
    if not math.isfinite(days) or days < 0:
        raise ConfigError(
            "the date window must be a finite number of days, zero or more", field="--date-window"
        )
    return days


def tokens(text: str) -> frozenset[str]:
    """The matcher's token set of a text."""
    return frozenset(t for t in _WORD.findall(text.lower()) if len(t) > 2 and t not in STOPWORDS)


def _text(title: str, description: str) -> str:
    return f"{title}. {description}"


def token_f1(hindsight: frozenset[str], forecast: frozenset[str]) -> float:
    """Token F1 with P = |A∩B|/|B| and R = |A∩B|/|A|; 0 when either set is empty."""
    if not hindsight or not forecast:
        return 0.0
    common = len(hindsight & forecast)
    if common == 0:
        return 0.0
    precision = common / len(forecast)
    recall = common / len(hindsight)
    return 2 * precision * recall / (precision + recall)


def bm25_scores(query: frozenset[str], documents: Sequence[frozenset[str]]) -> list[float]:
    """BM25 of a token-set query against token-set documents (tf = 1, length = set size)."""
    n = len(documents)
    if n == 0:
        return []
    avgdl = sum(len(d) for d in documents) / n
    if avgdl == 0:
        return [0.0] * n
    # Terms in sorted order and an exact sum: a set's iteration order follows the process's hash
    # seed, and a float sum in that order would make scores (and near-threshold matches) differ
    # from one process to the next.
    terms = sorted(query)
    idf: dict[str, float] = {}
    for term in terms:
        df = sum(1 for d in documents if term in d)
        idf[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    scores: list[float] = []
    for doc in documents:
        norm = 1 - BM25_B + BM25_B * len(doc) / avgdl
        weight = (BM25_K1 + 1) / (1 + BM25_K1 * norm)
        scores.append(math.fsum(idf[t] * weight for t in terms if t in doc))
    return scores


class Match(BaseModel):
    model_config = ConfigDict(frozen=True)

    hindsight: str
    forecast: str
    score: float


class KerReport(BaseModel):
    """Key-event recall and the event-level matching figures behind it."""

    model_config = ConfigDict(frozen=True)

    ker: float | None
    key_events: list[str]
    matched_key_events: list[str]
    matches: list[Match]
    event_precision: float | None
    event_recall: float | None
    event_f1: float | None
    mass_weighted_recall: float | None
    date_window_days: float | None
    forecast_events: int
    hindsight_events: int


@dataclass(frozen=True, slots=True)
class _Pair:
    score: float
    h: int
    f: int


def key_events(graph: HindsightGraph) -> list[HindsightEvent]:
    """Non-outcome events with key score ≥ 0.2, the top 5 by (score, index) descending."""
    scored = [
        (graph.key_score(ev.id), i, ev)
        for i, ev in enumerate(graph.events)
        if not ev.is_outcome and graph.key_score(ev.id) >= KEY_SCORE_MIN
    ]
    scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [ev for _, _, ev in scored[:KEY_EVENT_LIMIT]]


def _within(h: HindsightEvent, f: ForecastEvent, window: float | None) -> bool:
    if window is None or h.date is None or f.date is None:
        return True
    return abs((h.date - f.date).total_seconds()) <= window * 86400.0


def _kept_pairs(
    graph: HindsightGraph, forecast: Sequence[ForecastEvent], window: float | None
) -> list[_Pair]:
    h_sets = [tokens(_text(ev.title, ev.description)) for ev in graph.events]
    f_sets = [tokens(_text(ev.title, ev.description)) for ev in forecast]
    reverse: list[list[float]] = []
    for f_set in f_sets:
        raw = bm25_scores(f_set, h_sets)
        top = max(raw, default=0.0)
        reverse.append([s / top for s in raw] if top > 0 else [0.0] * len(raw))
    pairs: list[_Pair] = []
    for i, event in enumerate(graph.events):
        if event.is_outcome:
            continue
        forward = bm25_scores(h_sets[i], f_sets)
        ranked = sorted(range(len(f_sets)), key=lambda j: (-forward[j], j))
        for j in ranked[:CANDIDATES_PER_EVENT]:
            score = REVERSE_WEIGHT * reverse[j][i] + F1_WEIGHT * token_f1(h_sets[i], f_sets[j])
            if score >= PAIR_SCORE_MIN and _within(event, forecast[j], window):
                pairs.append(_Pair(score=score, h=i, f=j))
    return pairs


def _ratio(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def key_event_recall(
    graph: HindsightGraph,
    forecast: Sequence[ForecastEvent],
    *,
    date_window_days: float | None = DEFAULT_DATE_WINDOW_DAYS,
) -> KerReport:
    """Match forecast events to hindsight events and score the recall of key events."""
    pairs = _kept_pairs(graph, forecast, date_window_days)
    pairs_sorted = sorted(pairs, key=lambda p: (p.score, p.h, p.f), reverse=True)
    used_h: set[int] = set()
    used_f: set[int] = set()
    assigned: list[_Pair] = []
    for pair in pairs_sorted:
        if pair.h in used_h or pair.f in used_f:
            continue
        used_h.add(pair.h)
        used_f.add(pair.f)
        assigned.append(pair)

    keys = key_events(graph)
    key_ids = [ev.id for ev in keys]
    matched_ids = {graph.events[p.h].id for p in assigned}
    matched_keys = [k for k in key_ids if k in matched_ids]
    ker = None if not forecast or not keys else len(matched_keys) / len(keys)

    best_mass: dict[str, float] = {}
    for pair in pairs:
        h_id = graph.events[pair.h].id
        mass = forecast[pair.f].mass
        best_mass[h_id] = max(best_mass.get(h_id, 0.0), 1.0 if mass is None else mass)
    mass_recall = (
        None if ker is None else sum(best_mass.get(k, 0.0) for k in key_ids) / len(key_ids)
    )

    non_outcome = sum(1 for ev in graph.events if not ev.is_outcome)
    precision = _ratio(len(assigned), len(forecast))
    recall = _ratio(len(assigned), non_outcome)
    f1: float | None = None
    if precision is not None and recall is not None:
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return KerReport(
        ker=ker,
        key_events=key_ids,
        matched_key_events=matched_keys,
        matches=[
            Match(hindsight=graph.events[p.h].id, forecast=forecast[p.f].id, score=p.score)
            for p in assigned
        ],
        event_precision=precision,
        event_recall=recall,
        event_f1=f1,
        mass_weighted_recall=mass_recall,
        date_window_days=date_window_days,
        forecast_events=len(forecast),
        hindsight_events=len(graph.events),
    )
