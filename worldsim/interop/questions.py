"""Question sets in: files of questions become cards, and what cannot become one is listed.

Two shapes are read:

* a **ForecastBench question set** (``.json``): an object with ``forecast_due_date``,
  ``question_set`` and ``questions``, each with ``id``, ``source``, ``question``,
  ``background``, ``resolution_criteria``, ``freeze_datetime``, ``freeze_datetime_value``,
  ``freeze_datetime_value_explanation``, ``market_info_close_datetime``, ``url`` and
  ``resolution_dates`` (a list of dates for a data-set question, ``"N/A"`` for a market);
* a **plain list** (``.csv`` or ``.jsonl``): one question per row with ``question``,
  ``as_of``, ``deadline``, optional ``id``, ``background`` and ``outcomes`` (``A|B|C``: a
  multiple-choice card; none: binary yes/no).

A data-set question becomes one card per resolution date (``<source>-<id>-<date>``); a market
question one card (``<source>-<id>``) whose deadline is the market's close.
``{forecast_due_date}`` and ``{resolution_date}`` in a question's text are filled
in. A card's ``as_of`` is the question's freeze date (else the set's due date); its context holds
the background, the resolution criteria and the value at the freeze date. Each card records its
provenance (file name, question id, source, url) and has no seeds: the initializer role builds
its world from the text. A question that cannot make a valid card (no text, a missing or bad
date, a deadline not after its as-of, a combination of questions) is listed in the rejects with
its reason, never dropped silently.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from worldsim.domain.cards import Card, parse_utc
from worldsim.domain.errors import CardError
from worldsim.domain.files import csv_rows, first_error, load_document, read_jsonl, write_files

__all__ = [
    "Imported",
    "Reject",
    "binary_endpoints",
    "card_id_for",
    "card_yaml",
    "import_questions",
    "slug",
    "write_imported",
]

REJECTS = "rejects.jsonl"
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class Reject:
    """A question that did not become a card: where it was (id or line) and why."""

    where: str
    reason: str


@dataclass(frozen=True, slots=True)
class Imported:
    """The cards a file gave, and the questions it could not turn into cards."""

    cards: tuple[Card, ...]
    rejects: tuple[Reject, ...]


def import_questions(path: str | Path) -> Imported:
    """Read a question file (see the module's doc); a file that is not a question set at all
    is a `CardError` naming it."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".json":
        doc = load_document(p, what="question set")
        if not isinstance(doc, dict) or not isinstance(doc.get("questions"), list):
            raise CardError(
                "expected a ForecastBench question set: an object with 'questions'", file=p
            )
        made = _forecastbench(doc, p.name)
    elif suffix == ".jsonl":
        made = _plain(((str(n), row) for n, row in read_jsonl(p, what="question list")), p.name)
    elif suffix == ".csv":
        made = _plain(_csv_rows(p), p.name)
    else:
        raise CardError(
            "give a ForecastBench question set (.json) or a question list (.csv, .jsonl)", file=p
        )
    cards: dict[str, Card] = {}
    rejects: list[Reject] = []
    for where, data in made:
        if isinstance(data, str):
            rejects.append(Reject(where, data))
            continue
        try:
            card = Card.model_validate(data)
        except ValidationError as exc:
            field, message = first_error(exc)
            rejects.append(Reject(where, f"field '{field}': {message}"))
            continue
        if card.id in cards:
            rejects.append(Reject(where, f"card id '{card.id}' given twice"))
            continue
        cards[card.id] = card
    return Imported(tuple(cards[k] for k in sorted(cards)), tuple(rejects))


def card_yaml(card: Card) -> bytes:
    """A card as the YAML file a user would write: id and question first, defaults left out."""
    data = card.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    data = {"id": card.id, "question": card.question, **data}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")


def write_imported(imported: Imported, out: Path) -> list[Path]:
    """One YAML card per question in ``out`` and ``out/rejects.jsonl``, each written whole."""
    files: dict[Path, bytes] = {}
    for card in imported.cards:
        files[out / f"{card.id}.yaml"] = card_yaml(card)
    lines = [json.dumps({"where": r.where, "reason": r.reason}) + "\n" for r in imported.rejects]
    files[out / REJECTS] = "".join(lines).encode("utf-8")
    write_files(files)
    return sorted(files)


def card_id_for(source: str, question_id: str, resolution_date: str | None) -> str:
    """The card id an imported question gets: ``<source>-<id>``, and ``-<date>`` for each
    resolution date of a data-set question (labels are matched to cards by it)."""
    return slug(source, question_id, resolution_date or "")


def slug(*parts: str) -> str:
    """Parts joined into an id: letters, digits, ``_``, ``.``, ``-``; at most 120 characters."""
    return _SLUG.sub("-", "-".join(p for p in parts if p)).strip("-.")[:120]


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _date(value: object) -> str | None:
    """An ISO date or datetime as UTC ISO text, or None when it is missing or bad."""
    if not isinstance(value, str) or not value.strip() or value.strip().upper() == "N/A":
        return None
    try:
        return parse_utc(value.strip()).isoformat().replace("+00:00", "Z")
    except ValueError:
        return None


def binary_endpoints(question: str) -> list[dict[str, Any]]:
    return [
        {"id": "yes", "title": f"Yes: {question}"[:1000], "kind": "scored", "polarity": "yes"},
        {"id": "no", "title": f"No: {question}"[:1000], "kind": "scored", "polarity": "no"},
    ]


def _forecastbench(doc: Mapping[str, Any], name: str) -> Iterator[tuple[str, dict[str, Any] | str]]:
    due = _date(doc.get("forecast_due_date"))
    for i, q in enumerate(doc["questions"]):
        where = f"questions.{i}"
        if not isinstance(q, dict):
            yield where, "not an object"
            continue
        qid, source = _text(str(q.get("id", ""))), _text(q.get("source"))
        where = f"{where} (id {qid or '?'})"
        if q.get("combination_of"):
            yield where, "a combination of questions: import its parts instead"
            continue
        text = _text(q.get("question"))
        if not qid or not text:
            yield where, "no id or no question text"
            continue
        as_of = _date(q.get("freeze_datetime")) or due
        if as_of is None:
            yield where, "no freeze_datetime and no forecast_due_date in the set"
            continue
        dates = q.get("resolution_dates")
        targets = (
            [_date(d) for d in dates] if isinstance(dates, list) and dates
            else [_date(q.get("market_info_close_datetime"))]
        )  # fmt: skip
        context = "\n\n".join(
            part
            for part in (
                _text(q.get("background")),
                "Resolution criteria: " + _text(q.get("resolution_criteria"))
                if _text(q.get("resolution_criteria"))
                else "",
                _freeze_value(q, as_of),
            )
            if part
        )
        dated = isinstance(dates, list) and bool(dates)  # a data-set question: one card per date
        for deadline in targets:
            if deadline is None:
                yield where, "no valid resolution date or market close date"
                continue
            filled = text.replace("{forecast_due_date}", (due or as_of)[:10])
            filled = filled.replace("{resolution_date}", deadline[:10])
            card_id = card_id_for(source, qid, deadline[:10] if dated else None)
            yield (
                where,
                {
                    "id": card_id,
                    "question": filled,
                    "as_of": as_of,
                    "deadline": deadline,
                    "endpoints": binary_endpoints(filled),
                    "context": context,
                    "provenance": {
                        "source_file": name,
                        "question_id": qid,
                        "source": source or None,
                        "url": _text(q.get("url")) or None,
                    },
                },
            )


def _freeze_value(q: Mapping[str, Any], as_of: str) -> str:
    """``Value at DATE: V (what V is)``, or nothing when the question gives no value."""
    value = q.get("freeze_datetime_value")
    if value in (None, "", "N/A"):
        return ""
    what = _text(q.get("freeze_datetime_value_explanation"))
    return f"Value at {as_of[:10]}: {value}" + (f" ({what})" if what else "")


def _csv_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CardError(f"cannot read the question list: {exc}", file=path) from None
    _, rows = csv_rows(io.StringIO(text), path)
    for n, (_, row) in enumerate(rows, start=2):
        yield f"line {n}", dict(row)


def _plain(
    rows: Iterable[tuple[str, dict[str, Any]]], name: str
) -> Iterator[tuple[str, dict[str, Any] | str]]:
    for where, row in rows:
        where = where if where.startswith("line") else f"line {where}"
        text = _text(row.get("question"))
        if not text:
            yield where, "no question text"
            continue
        as_of, deadline = _date(row.get("as_of")), _date(row.get("deadline"))
        if as_of is None or deadline is None:
            yield where, "as_of and deadline must be ISO dates"
            continue
        qid = _text(str(row.get("id") or "")) or slug(text.lower())[:60]
        outcomes = [o.strip() for o in _text(row.get("outcomes")).split("|") if o.strip()]
        if len(outcomes) == 1:
            yield where, "outcomes needs two or more, separated by |"
            continue
        endpoints = (
            [
                {"id": slug(o.lower()) or f"o{i}", "title": o, "kind": "scored"}
                for i, o in enumerate(outcomes)
            ]
            if outcomes
            else binary_endpoints(text)
        )
        yield (
            where,
            {
                "id": slug(qid),
                "question": text,
                "kind": "multiple_choice" if outcomes else "binary",
                "as_of": as_of,
                "deadline": deadline,
                "endpoints": endpoints,
                "context": _text(row.get("background")),
                "provenance": {"source_file": name, "question_id": qid},
            },
        )
