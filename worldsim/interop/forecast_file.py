"""A ForecastBench forecast file read as ForecastBench reads it, and checked against its round.

The rules are ported from ``forecastingresearch/forecastbench`` (commit 05f612e):

* ``src/orchestration/_io.py`` ``read_forecast_file``: the file is a non-empty JSON object;
  ``organization``, ``model``, ``model_organization``, ``question_set`` and ``forecasts`` are
  all given (non-empty); ``question_set`` holds a ``YYYY-MM-DD``, the round's due date;
  ``forecasts`` is a non-empty list. A file failing any of these is dropped whole.
* ``src/orchestration/func_resolve/main.py`` ``driver``: the resolver takes the due date from
  the *first ten characters* of ``question_set`` and resolves the round's published set of that
  date (``-human`` when the name says ``human``; any other spelling names the same set); a row
  without ``direction`` has none.
* ``src/sources/_base.py`` ``_make_columns_hashable``: a ``direction`` list is compared as a
  tuple, a missing one (absent, null, NaN) as the empty tuple, any other value as it is. The
  round's resolutions give a single question the empty direction and a combination 1 or -1
  for each of its questions (``src/resolve/explode_question_set.py``), so a single question's
  row, market or data-set, with any other direction (``"up"``, ``[1]``, ``0``), or a
  combination row with another, matches no resolution.
* ``src/resolve/_prepare.py`` ``check_and_prepare_forecast_file``: a row whose ``source``
  (lower-cased) is not a ForecastBench source, or whose ``forecast`` is missing or outside
  [0, 1], is dropped; a data-set row whose ``resolution_date`` (first ten characters) is not the
  due date plus one of the horizons is dropped (the ``resolution_date`` key must exist: the
  reader slices it); a market row's date is ignored; two data-set rows with the same id,
  source, resolution date and direction refuse the whole file. ``set_resolution_dates`` then
  joins the round's resolutions to the rows on id, source, direction and due date (data-set
  rows on their resolution date too), so a market question forecast twice is counted twice.
* ``src/resolve/_impute.py`` ``impute_missing_forecasts``: a question of the round without a
  forecast is imputed 0.5. The rows the leaderboard counts are those of
  ``src/resolve/explode_question_set.py``, dates passed so far only: a data-set question at
  each of its resolution dates, a market question once (``src/sources/_market.py`` resolves
  every date of a market to the same row and drops the duplicates); combinations are left out.
  ``src/leaderboard/main.py`` leaves out a forecaster with more than 5 per cent of those rows
  imputed over the round, over its market rows or over its resolved data-set rows: the check
  counts the rows as each resolution date passes and names the worst share of each (data-set
  rows taken as resolved at their date).

`check_forecast_file` applies them all and lists every problem; `naive_forecasts` reads a
Naive Forecaster file's data-set forecasts.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from worldsim.domain.errors import CardError
from worldsim.domain.forecastbench import (
    DATASET_SOURCES,
    IMPUTED_CUTOFF_PCT,
    MARKET_SOURCES,
    SOURCES,
    QuestionRow,
    due_date_in,
    horizon_dates,
    is_combination,
    load_question_set,
    question_rows,
)

__all__ = [
    "Checked",
    "check_forecast_file",
    "combinations_of",
    "naive_forecasts",
    "read_rows",
]

_REQUIRED = ("organization", "model", "model_organization", "question_set", "forecasts")


@dataclass(frozen=True, slots=True)
class Checked:
    """What ForecastBench's reader makes of a forecast file: the problems it would meet (the
    file is dropped, a row is dropped, a question is imputed), and the rows it keeps."""

    problems: tuple[str, ...]
    kept: dict[QuestionRow, float] = field(default_factory=dict)
    due: str | None = None
    imputed: int = 0
    questions: int = 0
    untold: int = 0
    """Problems counted but not listed: unanswered questions past the first twenty."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def count(self) -> int:
        """How many problems there are, the unlisted ones included (a line says how many of
        them ``problems`` leaves out)."""
        return len(self.problems) - (1 if self.untold else 0) + self.untold


def _refused(problem: str) -> Checked:
    return Checked((problem,))


def read_rows(
    data: Any, combinations: frozenset[tuple[str, ...]] | None = None
) -> tuple[list[str], dict[QuestionRow, float], str | None]:
    """The reader's file-level rules and row rules on a loaded file: (problems, the kept rows'
    forecasts, the due date). A combination row (a list of ids) is the reader's to keep and
    resolve when the round holds that combination (``combinations``: their id lists, as the
    set gives them); it is not among the kept rows, which are single questions."""
    if not data or not isinstance(data, dict):
        return ["the file is not a JSON object: the reader drops it"], {}, None
    missing = [k for k in _REQUIRED if not data.get(k)]
    if missing:
        return (
            [f"missing required field(s) {', '.join(missing)}: the reader drops the file"],
            {},
            None,
        )
    name = data["question_set"]
    if not isinstance(name, str) or due_date_in(name) is None:
        return [f"question_set {name!r} holds no YYYY-MM-DD: the reader drops the file"], {}, None
    due = due_date_in(name)
    problems: list[str] = []
    if name[:10] != due:
        problems.append(
            f"question_set {name!r} does not start with its date: the resolver takes the due "
            f"date from its first ten characters ({name[:10]!r})"
        )
    forecasts = data["forecasts"]
    if not isinstance(forecasts, list) or not all(isinstance(f, dict) for f in forecasts):
        return [*problems, "forecasts is not a list of objects: the reader drops the file"], {}, due
    if not any("resolution_date" in f for f in forecasts):
        problems.append("no forecast has a resolution_date key: the reader fails on the file")
        return problems, {}, due
    assert due is not None
    valid_dates = set(horizon_dates(date.fromisoformat(due)))
    kept: dict[QuestionRow, float] = {}
    dataset_seen: set[tuple[str, str, str, str]] = set()
    for i, row in enumerate(forecasts):
        where = f"forecasts.{i}"
        source = row.get("source")
        source = source.lower() if isinstance(source, str) else source
        if source not in SOURCES:
            problems.append(f"{where}: source {row.get('source')!r} is unknown: row dropped")
            continue
        value = row.get("forecast")
        if isinstance(value, str):
            problems.append(
                f"{where}: forecast {value!r} is text, not a number: the reader's range check "
                "fails on it, and on the whole file"
            )
            continue
        if isinstance(value, bool):
            problems.append(
                f"{where}: forecast {value!r} is a boolean: the reader keeps it as {int(value)}"
            )
        elif value is None or not isinstance(value, int | float) or math.isnan(value):
            problems.append(f"{where}: forecast {value!r} is not a number: row dropped")
            continue
        if not 0.0 <= value <= 1.0:
            problems.append(f"{where}: forecast {value!r} is outside [0, 1]: row dropped")
            continue
        qid = row.get("id")
        direction = _direction(row.get("direction"))
        if isinstance(qid, list):
            ids = tuple(str(x) for x in qid)
            if combinations is None or ids not in combinations:
                problems.append(f"{where}: a combination question the round does not hold")
            elif not _combination_direction(direction, len(ids)):
                problems.append(
                    f"{where}: direction {row.get('direction')!r} is not one of the "
                    f"combination's: {_UNMATCHED}"
                )
            continue
        if not isinstance(qid, str) or not qid:
            problems.append(f"{where}: id {qid!r} is not text: it matches no question")
            continue
        text_id = qid
        resolution = row.get("resolution_date")
        if source in DATASET_SOURCES:
            day = resolution[:10] if isinstance(resolution, str) else None
            if day not in valid_dates:
                problems.append(
                    f"{where}: resolution_date {resolution!r} is not the due date {due} plus a "
                    "horizon: row dropped"
                )
                continue
            key = (source, text_id, day, repr(direction))
            if key in dataset_seen:
                problems.append(
                    f"{where}: {source} {text_id} at {day} is forecast twice: the reader "
                    "refuses the whole file"
                )
                continue
            dataset_seen.add(key)
            if direction != ():
                problems.append(_single_direction(where, row.get("direction")))
                continue
            kept[(source, text_id, day)] = float(value)
        else:
            if direction != ():
                problems.append(_single_direction(where, row.get("direction")))
                continue
            if (source, text_id, None) in kept:
                problems.append(
                    f"{where}: market question {source} {text_id} is forecast twice: it would "
                    "be scored twice"
                )
                continue
            kept[(source, text_id, None)] = float(value)
    return problems, kept, due


_UNMATCHED = "the row matches no resolution, and ForecastBench imputes the question 0.5"


def _direction(value: object) -> object:
    """A row's direction as the reader compares it (``_make_columns_hashable``): a list as a
    tuple, a missing one (absent, null, NaN) as the empty tuple, anything else as it is."""
    if isinstance(value, list):
        return tuple(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ()
    return value


def _combination_direction(direction: object, n: int) -> bool:
    """Whether ``direction`` is one the round resolves a combination of ``n`` questions at:
    1 or -1 for each (``explode_question_set``)."""
    return (
        isinstance(direction, tuple)
        and len(direction) == n
        and all(d in (1, -1) for d in direction)
    )


def _single_direction(where: str, direction: object) -> str:
    return (
        f"{where}: direction {direction!r} on a single question, which has none (null, [] or "
        f"no key): {_UNMATCHED}"
    )


def check_forecast_file(path: Path, question_set: Path) -> Checked:
    """Apply the reader's rules (see the module) to the forecast file ``path`` for the round of
    ``question_set``; a question set that cannot be read is a `CardError`."""
    question_set, doc = load_question_set(question_set)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _refused(f"cannot be read as JSON ({exc}): the reader drops it")
    problems, kept, due = read_rows(data, combinations_of(doc))
    if due is None:
        return Checked(tuple(problems))
    set_name = str(doc.get("question_set") or question_set.name)
    named = str(data["question_set"])
    if _resolved_as(named) != _resolved_as(set_name):
        problems.append(
            f"question_set is {named!r}, but the set given is {set_name!r}: the resolver scores "
            f"it against {_resolved_as(named)}, which its name gives"
        )
    set_due = str(doc.get("forecast_due_date") or "")[:10]
    if set_due and due != set_due:
        problems.append(f"its due date {due} is not the set's ({set_due})")
    given_due = data.get("forecast_due_date")
    if given_due is not None and str(given_due)[:10] != due:
        problems.append(
            f"forecast_due_date {given_due!r} differs from the date in question_set ({due}), "
            "which the reader uses"
        )
    wanted = question_rows(doc)
    answered = set(kept)
    unanswered = [row for row in wanted if row not in answered]
    for source, qid, day in unanswered[:20]:
        at = f" at {day}" if day else ""
        problems.append(f"{source} {qid}{at} is not answered: ForecastBench imputes 0.5")
    if len(unanswered) > 20:
        problems.append(f"... and {len(unanswered) - 20} more questions not answered")
    known = set(wanted)
    extra = [row for row in kept if row not in known]
    if extra:
        problems.append(
            f"{len(extra)} forecast(s) for questions not in the set (e.g. {extra[0][0]} "
            f"{extra[0][1]}): never scored"
        )
    problems += _over_cutoff(wanted, set(unanswered))
    untold = max(0, len(unanswered) - 20)
    return Checked(tuple(problems), kept, due, len(unanswered), len(wanted), untold)


def _over_cutoff(wanted: list[QuestionRow], unanswered: set[QuestionRow]) -> list[str]:
    """The leaderboard's imputed shares over its cut-off, the worst of each as the round's
    resolution dates pass (a market question is one row, a data-set question a row at each of
    its dates)."""
    dates = sorted({day for _, _, day in wanted if day is not None})
    markets = [row for row in wanted if row[0] in MARKET_SOURCES]
    missing_markets = sum(row in unanswered for row in markets)
    worst: dict[str, tuple[float, str]] = {}
    for cut in dates:
        data = [row for row in wanted if row[2] is not None and row[2] <= cut]
        missing_data = sum(row in unanswered for row in data)
        shares = {
            "the round": (missing_markets + missing_data, len(markets) + len(data)),
            "the round's market questions": (missing_markets, len(markets)),
            "the round's data-set rows": (missing_data, len(data)),
        }
        for what, (missing, rows) in shares.items():
            share = 100.0 * missing / rows if rows else 0.0
            if share > worst.get(what, (0.0, ""))[0]:
                worst[what] = (share, cut)
    if not dates and markets:
        worst["the round's market questions"] = (100.0 * missing_markets / len(markets), "")
    problems = []
    for what, (share, cut) in worst.items():
        if share > IMPUTED_CUTOFF_PCT:
            when = f" once {cut} has resolved" if len(dates) > 1 else ""
            problems.append(
                f"{share:.1f}% of {what} imputed{when}: the leaderboard leaves out a forecaster "
                f"with more than {IMPUTED_CUTOFF_PCT:g}%"
            )
    return problems


def combinations_of(doc: object) -> frozenset[tuple[str, ...]]:
    """The id lists of a question set's combination questions."""
    questions = doc.get("questions") if isinstance(doc, dict) else None
    return frozenset(
        tuple(str(x) for x in q["id"])
        for q in (questions if isinstance(questions, list) else ())
        if isinstance(q, dict) and is_combination(q) and isinstance(q.get("id"), list)
    )


def _resolved_as(question_set: str) -> str:
    """The published set the resolver scores a file against: the date in the first ten
    characters of its ``question_set``, ``-human`` when the name says ``human``."""
    return f"{question_set[:10]}-{'human' if 'human' in question_set else 'llm'}.json"


def naive_forecasts(path: Path) -> tuple[str, dict[tuple[str, str, str], float]]:
    """The round's due date and the data-set forecasts of a ForecastBench forecast file (the
    round's Naive Forecaster file), by (source, id, resolution date): the rows its reader
    keeps."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CardError(f"cannot read the naive forecasts: {exc}", file=path) from None
    problems, kept, due = read_rows(data)
    if due is None:
        raise CardError(problems[0] if problems else "not a forecast file", file=path)
    return due, {(s, i, d): p for (s, i, d), p in kept.items() if d is not None}
