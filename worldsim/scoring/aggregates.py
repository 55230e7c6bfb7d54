"""Seed aggregates: per (card, method, forecast date), a study's p_yes over its seeds as the
mean, the median and the logit-mean (the mean of log-odds, p clipped to [0.001, 0.999] so that
a forecast of 0 or 1 stays finite). ``DIR/aggregates.csv`` holds them; `worldsim export` sends
one of them."""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, get_args

__all__ = ["AGGREGATES", "CLIP", "Aggregate", "aggregate", "aggregates_csv", "seed_aggregates"]

AGGREGATES = "aggregates.csv"
CLIP = 0.001
Aggregate = Literal["mean", "median", "logit_mean"]
_AGGREGATES: tuple[Aggregate, ...] = get_args(Aggregate)
_COLUMNS = ("card_id", "method", "condition", "forecast_date", "seeds", *_AGGREGATES)


class _Row(Protocol):
    """What a prediction row gives the aggregates (`worldsim.study.outputs.PredictionRow`)."""

    @property
    def card_id(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def condition(self) -> str: ...
    @property
    def forecast_date(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def p_yes(self) -> float | None: ...


def aggregate(values: Sequence[float], how: Aggregate) -> float:
    """The seeds' p_yes combined ``how``; ``values`` must not be empty."""
    if how == "mean":
        return math.fsum(values) / len(values)
    if how == "median":
        return float(statistics.median(values))
    clipped = [min(max(v, CLIP), 1 - CLIP) for v in values]
    mean = math.fsum(math.log(v / (1 - v)) for v in clipped) / len(clipped)
    return 1 / (1 + math.exp(-mean))


def seed_aggregates(rows: Iterable[_Row]) -> list[dict[str, object]]:
    """One row per (card, method, forecast date) with a complete binary forecast."""
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.status == "complete" and row.p_yes is not None:
            key = (row.card_id, row.method, row.condition, row.forecast_date)
            groups[key].append(row.p_yes)
    return [
        {
            "card_id": card,
            "method": method,
            "condition": condition,
            "forecast_date": date,
            "seeds": len(values),
            **{how: round(aggregate(values, how), 6) for how in _AGGREGATES},
        }
        for (card, method, condition, date), values in sorted(groups.items())
    ]


def aggregates_csv(rows: Iterable[_Row]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(seed_aggregates(rows))
    return buffer.getvalue().encode()
