"""ForecastBench's vocabulary, as its own code states it: the question sources, the forecast
horizons of data-set questions, and how a question set's name gives the round's due date.

Import (`worldsim.interop`), export, the submission check and `score --forecastbench` share
these, so all four read a round the same way. The lists follow
``src/sources/_metadata.py`` and ``src/helpers/constants.py`` of
``forecastingresearch/forecastbench``.
"""

from __future__ import annotations

import math
import re
from datetime import date, timedelta

__all__ = [
    "DATASET_SOURCES",
    "FORECAST_HORIZONS_DAYS",
    "MARKET_SOURCES",
    "SOURCES",
    "due_date_in",
    "horizon_dates",
    "is_combination",
    "is_na",
]

MARKET_SOURCES = frozenset({"infer", "manifold", "metaculus", "polymarket"})
"""Prediction markets and forecasting platforms: one question, resolved when the market is."""
DATASET_SOURCES = frozenset({"acled", "dbnomics", "fred", "wikipedia", "yfinance"})
"""Data series: one question per resolution date (the due date plus each horizon)."""
SOURCES = MARKET_SOURCES | DATASET_SOURCES

FORECAST_HORIZONS_DAYS: tuple[int, ...] = (7, 30, 90, 180, 365, 1095, 1825, 3650)
"""Days from the forecast due date to a data-set question's resolution dates."""

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def due_date_in(question_set: str) -> str | None:
    """The first ``YYYY-MM-DD`` in a question set's name: ForecastBench's reader takes the
    round's forecast due date from it (``read_forecast_file``)."""
    found = _DATE.search(question_set)
    return found.group(0) if found else None


def horizon_dates(due: date) -> tuple[str, ...]:
    """The resolution dates a data-set question of the round due on ``due`` may carry."""
    return tuple((due + timedelta(days=d)).isoformat() for d in FORECAST_HORIZONS_DAYS)


def is_na(value: object) -> bool:
    """ForecastBench's spellings of "no value": ``"N/A"``, an empty string, null, NaN."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, str) and value.strip().upper() in ("", "N/A", "NAN", "NONE")


def is_combination(question: dict[str, object]) -> bool:
    """A question combining others: its ``id`` is a list of ids, or its ``combination_of`` is
    given (``"N/A"`` on every single question of the sets that carry the field)."""
    if isinstance(question.get("id"), list):
        return True
    combined = question.get("combination_of")
    if isinstance(combined, list | tuple | dict):
        return len(combined) > 0
    return not is_na(combined) and combined is not False
