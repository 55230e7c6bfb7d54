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
from pathlib import Path
from typing import Any

from worldsim.domain.errors import CardError, ConfigError
from worldsim.domain.files import load_document

__all__ = [
    "DATASET_SOURCES",
    "FORECAST_HORIZONS_DAYS",
    "IMPUTED_CUTOFF_PCT",
    "MARKET_SOURCES",
    "SOURCES",
    "QuestionRow",
    "card_id_for",
    "due_date_in",
    "freeze_value",
    "horizon_dates",
    "is_combination",
    "is_na",
    "load_question_set",
    "question_rows",
    "round_key",
    "slug",
]

MARKET_SOURCES = frozenset({"infer", "manifold", "metaculus", "polymarket"})
"""Prediction markets and forecasting platforms: one question, resolved when the market is."""
DATASET_SOURCES = frozenset({"acled", "dbnomics", "fred", "wikipedia", "yfinance"})
"""Data series: one question per resolution date (the due date plus each horizon)."""
SOURCES = MARKET_SOURCES | DATASET_SOURCES

FORECAST_HORIZONS_DAYS: tuple[int, ...] = (7, 30, 90, 180, 365, 1095, 1825, 3650)
"""Days from the forecast due date to a data-set question's resolution dates."""
IMPUTED_CUTOFF_PCT = 5.0
"""The leaderboard leaves out a forecaster with more than this share of its rows imputed, over
the whole round, its market rows or its resolved data-set rows (``src/leaderboard/main.py``
``get_df_info``)."""

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")

QuestionRow = tuple[str, str, str | None]
"""(source, id, resolution date) of one row of a question set: a market question (date None),
or a data-set question at one of its resolution dates."""


def round_key(due: object, name: object) -> str | None:
    """What tells a round apart: its forecast due date, else its question set's name (a
    round's human and llm sets are one round). ``None`` for neither."""
    if isinstance(due, str) and due.strip():
        return due.strip()[:10]
    if isinstance(name, str) and name.strip():
        return name.strip()
    return None


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


def slug(*parts: str) -> str:
    """Parts joined into an id: letters, digits, ``_``, ``.``, ``-``; at most 120 characters."""
    return _SLUG.sub("-", "-".join(p for p in parts if p)).strip("-.")[:120]


def card_id_for(source: str, question_id: str, resolution_date: str | None) -> str:
    """The card id an imported question gets: ``<source>-<id>``, and ``-<date>`` for each
    resolution date of a data-set question (labels are matched to cards by it)."""
    return slug(source, question_id, resolution_date or "")


def question_rows(doc: object) -> list[QuestionRow]:
    """The rows a question set asks for: each market question, and each data-set question at
    each of its resolution dates (combination questions are left out)."""
    questions = doc.get("questions") if isinstance(doc, dict) else None
    rows: list[QuestionRow] = []
    for q in questions if isinstance(questions, list) else ():
        if not isinstance(q, dict) or is_combination(q):
            continue
        source, qid = str(q.get("source") or "").lower(), str(q.get("id") or "")
        if source in MARKET_SOURCES:
            rows.append((source, qid, None))
        elif isinstance(q.get("resolution_dates"), list):
            rows.extend((source, qid, str(d)[:10]) for d in q["resolution_dates"] if not is_na(d))
    return rows


def freeze_value(question: dict[str, object]) -> float | None:
    """A market question's value at its freeze date as a probability, or None."""
    if str(question.get("source") or "").lower() not in MARKET_SOURCES:
        return None
    try:
        value = float(str(question.get("freeze_datetime_value")))
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None


_POINTER = re.compile(r"[\w.-]+\.json")


def load_question_set(
    path: Path, error: type[ConfigError] = CardError
) -> tuple[Path, dict[str, Any]]:
    """A ForecastBench question set: the file it is (``path``, or the set a pointer names) and
    its document, an object with ``questions``; anything else is ``error`` naming the file."""
    path = _pointed_to(path, error)
    doc = load_document(path, what="question set", error=error)
    if not isinstance(doc, dict) or not isinstance(doc.get("questions"), list):
        raise error("expected a ForecastBench question set: an object with 'questions'", file=path)
    return path, doc


def _pointed_to(path: Path, error: type[ConfigError]) -> Path:
    """The question set ``path`` names when it is a pointer: ForecastBench's
    ``latest-llm.json`` is a git link, which a download or a checkout without links holds as a
    small file with the target's name as its text. Any other file is itself; a pointer whose
    target is not beside it is ``error``, naming both."""
    try:
        if path.stat().st_size > 256:
            return path
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return path  # read again, and refused with its reason, as a question set
    if not _POINTER.fullmatch(text) or text == path.name:
        return path
    target = path.parent / text
    if not target.is_file():
        raise error(
            f"a pointer to '{text}' (ForecastBench's latest-*.json is a link), which is not "
            "beside it: give that question set",
            file=path,
        )
    return target
