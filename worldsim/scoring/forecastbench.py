"""Scores as ForecastBench's leaderboard scores a round, before its difficulty adjustment.

Ported from ``forecastingresearch/forecastbench`` (commit 05f612e): ``src/resolve/_prepare.py``
and ``src/resolve/_impute.py`` (which forecast meets which resolution; a missing one is imputed
0.5), and the leaderboard's ``get_leaderboard_entry`` in ``src/leaderboard/main.py`` as it
stood before the leaderboard ranked by difficulty-adjusted Brier (commit 2c09d6a's parent; the
adjustment needs the other forecasters' forecasts):

* the rows scored are the round's question-set rows (each market question; each data-set
  question at each resolution date) that its resolution set resolves — here, that have a
  label, and a label read from another round's resolution set is refused: the round its
  ``forecast_due_date`` records, else the date its ``sources`` file name gives;
* a forecast answers a row only when it was made for the round, as a forecast file names its
  round (``func_resolve/main.py``): from a trace, its card was imported from this round's
  question set and the run's forecast date is not after the due date; from a table, its
  ``as_of``, when given, is not after the due date. Where a method has several, the earliest
  counts. The others are left out and counted; a row the method did not forecast is
  **imputed** 0.5;
* **dataset**: the mean Brier ``(p − y)²`` over resolved data-set rows; **market**: over every
  market row, a resolved one against its outcome and one still open against the market's value
  (a provisional label); **overall**: the mean of the two. ``market resolved`` and ``overall
  resolved`` (the dataset with the resolved markets only) are given beside them; the
  leaderboard since 2025-10-06 leaves markets still open out;
* **imputed**: the leaderboard leaves out a forecaster with more than 5% of its rows imputed
  over the round, over its market rows or over its resolved data-set rows (``get_df_info``);
  each share is given, and the ones over the cutoff are named;
* **accuracy** over the resolved rows, a forecast of exactly 0.5 counting as neither right nor
  wrong (it is left out of the count);
* comparison rows from ForecastBench's own baselines (``src/base_eval/
  naive_and_dummy_forecasters/main.py``): *Always 0.5*, and the *Imputed Forecaster* — a
  market question's value on the due date, 0.5 on a data-set question — with the freeze value
  standing in for the value on the due date (a question set carries the value at its freeze
  date only). The *Naive Forecaster*'s data-set rule fits each series' history, which a
  question set does not carry, so it is not reproduced.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from worldsim.domain.errors import CardError
from worldsim.domain.forecastbench import (
    IMPUTED_CUTOFF_PCT,
    MARKET_SOURCES,
    card_id_for,
    due_date_in,
    freeze_value,
    is_combination,
    load_question_set,
    question_rows,
    round_key,
)
from worldsim.scoring.inputs import PredictionRow
from worldsim.scoring.labels import LabelEntry, LabelSet

__all__ = [
    "ALWAYS_HALF",
    "IMPUTED_FORECASTER",
    "RoundScore",
    "RoundScores",
    "print_round",
    "score_round",
]

ALWAYS_HALF = "Always 0.5 (ForecastBench)"
IMPUTED_FORECASTER = "Imputed Forecaster (ForecastBench, freeze values)"
IMPUTED = 0.5
"""What ForecastBench imputes for a question a forecaster did not answer."""


@dataclass(frozen=True, slots=True)
class RoundScore:
    """One forecaster's scores over a round (None where there is nothing to average)."""

    method: str
    dataset: float | None
    market: float | None
    overall: float | None
    market_resolved: float | None
    market_open: float | None
    overall_resolved: float | None
    accuracy: float | None
    n_dataset: int
    n_market: int
    n_market_resolved: int
    n_decided: int
    imputed: int
    imputed_market: int = 0
    imputed_dataset: int = 0
    baseline: bool = False

    @property
    def n(self) -> int:
        return self.n_dataset + self.n_market

    @property
    def imputed_pct(self) -> float:
        return _pct(self.imputed, self.n)

    def imputed_shares(self) -> dict[str, float]:
        """The per cent imputed over the ``round``, its ``market`` rows and its ``dataset``
        rows (the resolved ones)."""
        return {
            "round": self.imputed_pct,
            "market": _pct(self.imputed_market, self.n_market),
            "dataset": _pct(self.imputed_dataset, self.n_dataset),
        }

    def over_cutoff(self) -> dict[str, float]:
        """The shares over the leaderboard's cutoff: any one leaves the forecaster out."""
        return {k: v for k, v in self.imputed_shares().items() if v > IMPUTED_CUTOFF_PCT}

    def to_json(self) -> dict[str, Any]:
        shares = self.imputed_shares()
        return {
            **asdict(self),
            "imputed_pct": self.imputed_pct,
            "imputed_market_pct": shares["market"],
            "imputed_dataset_pct": shares["dataset"],
            "over_imputed_cutoff": list(self.over_cutoff()),
        }


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


@dataclass(frozen=True, slots=True)
class RoundScores:
    """The round's scores: each method, then ForecastBench's baselines."""

    question_set: str
    due: str | None
    rows: int
    """The question set's rows (market questions, data-set questions × resolution dates)."""
    scored_rows: int
    """Those with a label: resolved, or a market still open (provisional)."""
    scores: tuple[RoundScore, ...]
    unverified: tuple[str, ...] = ()
    """The methods with a forecast read from a prediction table, not from a verified trace."""
    left_out: tuple[tuple[str, int], ...] = ()
    """Forecasts not made for the round, by why, and how many."""

    def to_json(self) -> dict[str, Any]:
        return {
            "question_set": self.question_set,
            "forecast_due_date": self.due,
            "rows": self.rows,
            "scored_rows": self.scored_rows,
            "scores": [s.to_json() for s in self.scores],
            "unverified_methods": list(self.unverified),
            "left_out": dict(self.left_out),
        }


@dataclass(frozen=True, slots=True)
class _Row:
    card_id: str
    market: bool
    outcome: float  # 1, 0, or an open market's value
    resolved: bool
    freeze: float | None


def score_round(
    question_set: Path, labels: LabelSet, predictions: Sequence[PredictionRow]
) -> RoundScores:
    """Score every method of ``predictions`` over the round of ``question_set`` (see the
    module); a question set that cannot be read is a `CardError`."""
    question_set, doc = load_question_set(question_set)
    name = str(doc.get("question_set") or question_set.name)
    due = str(doc.get("forecast_due_date") or "")[:10] or due_date_in(name)
    freeze = {
        (str(q.get("source") or "").lower(), str(q.get("id") or "")): freeze_value(q)
        for q in doc["questions"]
        if isinstance(q, dict) and not is_combination(q)
    }
    wanted = question_rows(doc)
    rows: list[_Row] = []
    for source, qid, day in wanted:
        card_id = card_id_for(source, qid, day)
        entry = labels.entries.get(card_id)
        if entry is None:
            continue
        label = entry.label
        _same_round(entry, due, name)
        if label.provisional:
            if source not in MARKET_SOURCES or label.value is None:
                continue
            outcome, resolved = label.value, False
        elif label.outcome in ("yes", "no"):
            outcome, resolved = (1.0 if label.outcome == "yes" else 0.0), True
        else:
            continue
        market = source in MARKET_SOURCES
        rows.append(_Row(card_id, market, outcome, resolved, freeze.get((source, qid))))
    if not rows:
        raise CardError(
            f"no question of {name} has a label: give the labels of its resolution set",
            file=question_set,
        )
    made_for, left_out = _made_for(predictions, round_key(due, name), due)
    forecasts = _forecasts(made_for)
    # a method none of whose forecasts was made for the round is scored as all imputed
    methods = sorted({r.method for r in predictions if r.kind == "binary"})
    scores = [_score(m, rows, forecasts.get(m, {})) for m in methods]
    scores.append(_score(ALWAYS_HALF, rows, {}, baseline=True))
    imputed = {r.card_id: r.freeze for r in rows if r.market and r.freeze is not None}
    scores.append(_score(IMPUTED_FORECASTER, rows, imputed, baseline=True))
    unverified = tuple(sorted({r.method for r in predictions if not r.trace}))
    return RoundScores(
        name, due, len(wanted), len(rows), tuple(scores), unverified, tuple(left_out.items())
    )


def _same_round(entry: LabelEntry, due: str | None, name: str) -> None:
    """Refuse a label read from another round's resolution set: the round its
    ``forecast_due_date`` records, else the date its resolution set's file name gives."""
    recorded = entry.label.forecast_due_date
    if recorded is not None:
        if due is not None and recorded.isoformat() != due:
            raise entry.refuse(
                f"read from the resolution set of the round due {recorded.isoformat()}, but "
                f"the question set {name} is due {due}: give the labels of its own resolution "
                "set",
                field="forecast_due_date",
            )
        return
    for source in entry.label.sources:
        day = due_date_in(source)
        if day is not None and due is not None and day != due:
            raise entry.refuse(
                f"read from {source}, the resolution set of the round due {day}, but the "
                f"question set {name} is due {due}: give the labels of its own resolution set",
                field="sources",
            )


def _made_for(
    predictions: Iterable[PredictionRow], this: str | None, due: str | None
) -> tuple[list[PredictionRow], dict[str, int]]:
    """The forecasts made for the round (see the module) and, by why, how many are not."""
    kept: list[PredictionRow] = []
    left: Counter[str] = Counter()
    for row in predictions:
        if row.trace and row.card_round != this:
            left[f"cards of another round ({row.card_round or 'no ForecastBench round'})"] += 1
        elif due is not None and row.as_of is not None and row.as_of.date().isoformat() > due:
            left["made after the round's due date"] += 1
        else:
            kept.append(row)
    return kept, dict(sorted(left.items()))


def _forecasts(predictions: Iterable[PredictionRow]) -> dict[str, dict[str, float]]:
    """Per method, per card: the mean p_yes of its binary forecasts at the earliest forecast
    date it has (the card's own date when the study includes it)."""
    grouped: dict[tuple[str, str], list[PredictionRow]] = defaultdict(list)
    for row in predictions:
        if row.kind == "binary" and row.p_yes is not None:
            grouped[(row.method, row.card_id)].append(row)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (method, card_id), group in grouped.items():
        dates = [r.as_of for r in group if r.as_of is not None]
        first = min(dates) if dates else None
        chosen = [r.p_yes for r in group if r.as_of == first and r.p_yes is not None]
        out[method][card_id] = math.fsum(chosen) / len(chosen)
    return out


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _score(
    method: str, rows: Sequence[_Row], forecast: Mapping[str, float], *, baseline: bool = False
) -> RoundScore:
    dataset: list[float] = []
    market: list[float] = []
    market_resolved: list[float] = []
    market_open: list[float] = []
    right = decided = 0
    imputed: Counter[bool] = Counter()  # by row.market
    for row in rows:
        p = forecast.get(row.card_id)
        if p is None:
            p = IMPUTED
            imputed[row.market] += 1
        brier = (p - row.outcome) ** 2
        if row.market:
            market.append(brier)
            (market_resolved if row.resolved else market_open).append(brier)
        else:
            dataset.append(brier)
        if row.resolved and p != 0.5:
            decided += 1
            right += (p > 0.5) == (row.outcome == 1.0)
    d, m, mr = _mean(dataset), _mean(market), _mean(market_resolved)
    return RoundScore(
        method=method,
        dataset=d,
        market=m,
        overall=None if d is None or m is None else (d + m) / 2,
        market_resolved=mr,
        market_open=_mean(market_open),
        overall_resolved=None if d is None or mr is None else (d + mr) / 2,
        accuracy=right / decided if decided else None,
        n_dataset=len(dataset),
        n_market=len(market),
        n_market_resolved=len(market_resolved),
        n_decided=decided,
        imputed=0 if baseline else imputed.total(),
        imputed_market=0 if baseline else imputed[True],
        imputed_dataset=0 if baseline else imputed[False],
        baseline=baseline,
    )


def print_round(scores: RoundScores, console: Any) -> None:
    """The round's table: each forecaster's dataset, market and overall Brier beside the
    baselines, the resolved-only figures, accuracy and the share imputed."""
    from rich.table import Table

    from worldsim.scoring.report import figure

    table = Table(
        title=f"ForecastBench · {scores.question_set} (due {scores.due}) · Brier, before the "
        "leaderboard's difficulty adjustment",
        title_justify="left",
    )
    columns = (
        "method",
        "dataset (n)",
        "market (n)",
        "overall",
        "market resolved (n)",
        "market open",
        "overall resolved",
        "accuracy (n)",
        "imputed",
    )
    for col in columns:
        table.add_column(col, justify="left" if col == "method" else "right")
    for s in scores.scores:
        table.add_row(
            f"{s.method} (unverified)" if s.method in scores.unverified else s.method,
            figure(s.dataset, s.n_dataset),
            figure(s.market, s.n_market),
            figure(s.overall),
            figure(s.market_resolved, s.n_market_resolved),
            figure(s.market_open),
            figure(s.overall_resolved),
            figure(s.accuracy, s.n_decided, 3),
            "—" if s.baseline else f"{s.imputed} ({s.imputed_pct:.1f}%)",
        )
    console.print(table)
    console.print(
        f"{scores.scored_rows} of the round's {scores.rows} question rows have a label "
        "(resolved, or a market still open, scored against its value); a forecaster's missing "
        "rows are imputed 0.5; overall = (dataset + market) / 2; accuracy leaves p = 0.5 out "
        f"(neither right nor wrong). The leaderboard leaves out a forecaster with more than "
        f"{IMPUTED_CUTOFF_PCT:g}% imputed over the round, its market rows or its resolved "
        "data-set rows.",
        highlight=False,
        soft_wrap=True,
    )
    for s in scores.scores:
        over = s.over_cutoff()
        if over:
            said = ", ".join(f"{where} {pct:.1f}%" for where, pct in over.items())
            console.print(
                f"{s.method}: over the cutoff ({said} imputed): the leaderboard leaves it out",
                highlight=False,
                soft_wrap=True,
            )
    for why, count in scores.left_out:
        console.print(
            f"left out: {count} forecast(s) not made for this round: {why}",
            highlight=False,
            soft_wrap=True,
        )
