"""A ForecastBench question set → one card per question and resolution date.

Every public set since the first round (2024-07-21, human and llm) is an object with
``forecast_due_date``, ``question_set`` and ``questions``. Each question has ``id``,
``source``, ``question``, ``resolution_criteria``, ``background``, ``source_intro``, ``url``,
``market_info_open_datetime``, ``market_info_close_datetime``,
``market_info_resolution_criteria``, ``freeze_datetime``, ``freeze_datetime_value``,
``freeze_datetime_value_explanation`` and ``resolution_dates`` (a list of dates for a data-set
question, ``"N/A"`` for a market); sets before 2025-10-26 add ``combination_of`` (``"N/A"``, or
the combined questions, whose ``id`` is then a list). ``"N/A"`` means no value anywhere.

A market question (infer, manifold, metaculus, polymarket) becomes one card,
``<source>-<id>``, ending at the market's close; a data-set question one card per resolution
date, ``<source>-<id>-<date>``. ``{forecast_due_date}`` and ``{resolution_date}`` in its text are
filled in. The card's ``as_of`` is the freeze date; its context holds the source's
introduction, the background, the resolution criteria (the set's and the market's own), the
market's dates and the value at the freeze date. Its provenance records the set's file and
``question_set`` name, the round's due date, the question id, source and url, the resolution
date, the market's open and close dates as given and the freeze value with its explanation.
A market card's prior (``seeds.base_rate``) is its freeze value (0 or 1 held at 0.001 or
0.999); a data-set card's is the round's naive forecast when one is given, else none (0.5). A
market closing after ``bounds.LATEST_DATE`` (Metaculus writes 2300-01-01 for "never") ends at
that date, its close kept as given.

Rejected, with the reason: a combination question (``combination``); a question missing
``id``, ``source`` or ``question`` (``field 'source': missing``, naming each); an unknown
source; a data-set question, or a market question with a freeze value, whose
``freeze_datetime`` is missing or no ISO date (ForecastBench writes it on every question and its
forecaster states the freeze value at that date; a market question giving neither starts at the
round's due date); a market question whose ``freeze_datetime_value`` is given but not a
probability in [0, 1] (a data-set question's may be any text: wikipedia's "No", a swimming
event); a data-set question without ``resolution_dates``; a missing or bad close or resolution
date.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from worldsim.domain import bounds
from worldsim.domain.cards import parse_utc, utc_iso
from worldsim.domain.forecastbench import (
    MARKET_SOURCES,
    SOURCES,
    card_id_for,
    due_date_in,
    freeze_value,
    is_combination,
    is_na,
    slug,
)

__all__ = [
    "COMBINATION",
    "NaiveForecasts",
    "Round",
    "binary_endpoints",
    "card_id_for",
    "held_prior",
    "iso_utc",
    "missing_fields",
    "question_set_cards",
    "round_of",
    "slug",
]

COMBINATION = "combination"
"""The reason a combination question is rejected (ForecastBench dropped them from 2025-10-26)."""
PRIOR_BOUNDS = (0.001, 0.999)
"""A prior lies strictly between 0 and 1: a value of 0 or 1 (or beyond) is held at these."""

NaiveForecasts = Mapping[tuple[str, str, str], float]
"""ForecastBench's naive forecast by (source, id, resolution date) of the round's data-set
questions."""


@dataclass(frozen=True, slots=True)
class Round:
    """The round a question set belongs to: its ``question_set`` name and forecast due date."""

    name: str
    due: str | None


def round_of(doc: Mapping[str, Any], file_name: str) -> Round:
    """The set's ``question_set`` name (else the file's) and due date (else the name's date)."""
    name = doc.get("question_set")
    name = name.strip() if isinstance(name, str) and name.strip() else file_name
    due = iso_utc(doc.get("forecast_due_date"))
    return Round(name, due[:10] if due else due_date_in(name))


def binary_endpoints(question: str) -> list[dict[str, Any]]:
    return [
        {"id": "yes", "title": f"Yes: {question}"[:1000], "kind": "scored", "polarity": "yes"},
        {"id": "no", "title": f"No: {question}"[:1000], "kind": "scored", "polarity": "no"},
    ]


def question_set_cards(
    doc: Mapping[str, Any], file_name: str, naive: NaiveForecasts | None = None
) -> Iterator[tuple[str, dict[str, Any] | str]]:
    """(where, card data) for each card of the set, or (where, reason) for a question that
    cannot make one."""
    this = round_of(doc, file_name)
    for i, q in enumerate(doc["questions"]):
        where = f"questions.{i}"
        if not isinstance(q, dict):
            yield where, "not an object"
            continue
        raw_id = q.get("id")
        qid = "+".join(map(str, raw_id)) if isinstance(raw_id, list) else _text(raw_id)
        where = f"{where} (id {qid or '?'})"
        if is_combination(q):
            yield where, COMBINATION
            continue
        yield from _cards(q, qid, where, this, file_name, naive or {})


def _cards(
    q: Mapping[str, Any],
    qid: str,
    where: str,
    this: Round,
    file_name: str,
    naive: NaiveForecasts,
) -> Iterator[tuple[str, dict[str, Any] | str]]:
    source, text = _text(q.get("source")).lower(), _text(q.get("question"))
    missing = missing_fields({"id": qid, "source": source, "question": text})
    if missing:
        yield where, missing
        return
    if source not in SOURCES:
        yield where, f"unknown source '{source}' (ForecastBench's: {', '.join(sorted(SOURCES))})"
        return
    market = source in MARKET_SOURCES
    as_of, problem = _as_of(q, market, this.due)
    if as_of is None:
        yield where, problem
        return
    dates = q.get("resolution_dates")
    if market:
        close = iso_utc(q.get("market_info_close_datetime"), clamp=True)
        targets = [(None, close)]
    elif isinstance(dates, list) and dates:
        targets = [(d, iso_utc(d)) for d in dates]
    else:
        yield where, "a data-set question without resolution_dates"
        return
    provenance = _provenance(q, qid, source, this, file_name)
    context = _context(q, as_of)
    for given, deadline in targets:
        if deadline is None:
            what = "market close date" if market else f"resolution date {given!r}"
            yield where, f"no valid {what}"
            continue
        day = deadline[:10]
        filled = text.replace("{forecast_due_date}", (this.due or as_of)[:10])
        filled = filled.replace("{resolution_date}", day)
        prior = _market_prior(q, as_of) if market else _naive_prior(naive.get((source, qid, day)))
        card: dict[str, Any] = {
            "id": card_id_for(source, qid, None if market else day),
            "question": filled,
            "as_of": as_of,
            "deadline": deadline,
            "endpoints": binary_endpoints(filled),
            "context": context,
            "provenance": provenance | ({} if market else {"resolution_date": day}),
        }
        if prior is not None:
            card["seeds"] = prior
        yield where, card


def _as_of(q: Mapping[str, Any], market: bool, due: str | None) -> tuple[str | None, str]:
    """(the card's ``as_of``, "") or (None, why the question makes no card).

    ``as_of`` is the freeze date, which ForecastBench writes on every question and its forecaster
    reads for every data-set question and every question with a freeze value (the prompt states
    the value at that date). A market question giving neither starts at the round's due date.
    A market's freeze value is a probability: any other is refused, not dropped."""
    raw, value = q.get("freeze_datetime"), _text(q.get("freeze_datetime_value"))
    if market and value and freeze_value(dict(q)) is None:
        return None, f"field 'freeze_datetime_value': not a probability in [0, 1] ({value!r})"
    if not is_na(raw):
        try:
            return utc_iso(parse_utc(raw.strip() if isinstance(raw, str) else raw)), ""
        except ValueError as exc:
            return None, f"field 'freeze_datetime': {exc}"
    if not market or value:
        return None, "field 'freeze_datetime': missing"
    start = iso_utc(due)
    if start is None:
        return None, "field 'freeze_datetime': missing, and the set has no forecast_due_date"
    return start, ""


def missing_fields(given: Mapping[str, str]) -> str | None:
    """The reason a row is left when fields it needs are empty (absent, ``"N/A"``, blank),
    naming them: ``field 'source': missing``, ``fields 'id' and 'question': missing``; else
    None."""
    names = [f"'{name}'" for name, text in given.items() if not text]
    if not names:
        return None
    if len(names) == 1:
        return f"field {names[0]}: missing"
    return f"fields {', '.join(names[:-1])} and {names[-1]}: missing"


def _provenance(
    q: Mapping[str, Any], qid: str, source: str, this: Round, file_name: str
) -> dict[str, Any]:
    fields = {
        "source_file": file_name,
        "question_set": this.name,
        "forecast_due_date": this.due,
        "question_id": qid,
        "source": source,
        "url": _text(q.get("url")) or None,
        "market_open": _text(q.get("market_info_open_datetime")) or None,
        "market_close": _text(q.get("market_info_close_datetime")) or None,
        "freeze_datetime": _text(q.get("freeze_datetime")) or None,
        "freeze_value": _text(q.get("freeze_datetime_value")) or None,
        "freeze_value_explanation": _text(q.get("freeze_datetime_value_explanation")) or None,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _context(q: Mapping[str, Any], as_of: str) -> str:
    criteria = _text(q.get("resolution_criteria"))
    market_criteria = _text(q.get("market_info_resolution_criteria"))
    opened, closes = (
        _text(q.get("market_info_open_datetime")),
        _text(q.get("market_info_close_datetime")),
    )
    market = "; ".join(
        part
        for part in (
            f"opened {opened[:10]}" if opened else "",
            f"closes {closes[:10]}" if closes else "",
        )
        if part
    )
    parts = (
        _text(q.get("source_intro")),
        _text(q.get("background")),
        f"Resolution criteria: {criteria}" if criteria else "",
        f"The market's resolution criteria: {market_criteria}" if market_criteria else "",
        f"Market: {market}." if market else "",
        _freeze_line(q, as_of),
    )
    return "\n\n".join(p for p in parts if p)[: bounds.MAX_CONTEXT_CHARS]


def _freeze_line(q: Mapping[str, Any], as_of: str) -> str:
    """``Value at DATE: V (what V is)``, or nothing when the question gives no value."""
    value = _text(q.get("freeze_datetime_value"))
    if not value:
        return ""
    what = _text(q.get("freeze_datetime_value_explanation"))
    return f"Value at {as_of[:10]}: {value}" + (f" ({what})" if what else "")


def _market_prior(q: Mapping[str, Any], as_of: str) -> dict[str, Any] | None:
    """The market's freeze value as the card's prior, or None when it has no numeric one."""
    value = freeze_value(dict(q))
    if value is None:
        return None
    held = held_prior(value)
    what = _text(q.get("freeze_datetime_value_explanation")) or "the market's value"
    source = f"the market's freeze value {value:g} at {as_of[:10]} ({what.rstrip('.')})"
    if held != value:
        source += f", held at {held:g} (a prior lies strictly between 0 and 1)"
    return {"base_rate": held, "prior_source": source}


def held_prior(value: float) -> float:
    """A probability as a card's prior: itself when strictly between 0 and 1, else held at
    `PRIOR_BOUNDS` (so a market's freeze value of 0.0005 stays 0.0005)."""
    low, high = PRIOR_BOUNDS
    if 0.0 < value < 1.0:
        return value
    return low if value <= 0.0 else high


def _naive_prior(value: float | None) -> dict[str, Any] | None:
    if value is None:
        return None
    return {
        "base_rate": held_prior(value),
        "prior_source": f"ForecastBench's naive forecast {value:g}",
    }


def _text(value: object) -> str:
    if is_na(value):
        return ""
    return value.strip() if isinstance(value, str) else str(value).strip()


def iso_utc(value: object, *, clamp: bool = False) -> str | None:
    """An ISO date or datetime as UTC ISO text; None when missing or bad. With ``clamp`` a date
    after ``bounds.LATEST_DATE`` (a market that never closes) becomes that date."""
    if not isinstance(value, str) or is_na(value):
        return None
    try:
        moment: datetime = parse_utc(value.strip())
    except ValueError:
        if not clamp or not _after_latest(value.strip()):
            return None
        moment = bounds.LATEST_DATE
    return utc_iso(moment)


def _after_latest(text: str) -> bool:
    year = text[:4]
    return year.isdigit() and int(year) >= bounds.LATEST_DATE.year and due_date_in(text) is not None
