"""Question sets in: files of questions become cards, and what cannot become one is listed.

Two shapes are read:

* a **ForecastBench question set** (``.json``): see `worldsim.interop.question_set`; a round's
  cards go into a folder of their own (importing into a folder that holds cards of another
  question set is refused);
* a **plain list** (``.csv`` or ``.jsonl``): one question per row with ``question``,
  ``as_of``, ``deadline``, optional ``id``, ``background`` and ``outcomes`` (``A|B|C``: a
  multiple-choice card; none: binary yes/no). A list without a required column (a CSV's
  header, a JSONL row's keys), with a column of another name or with no question at all is
  refused naming the file and the column, as `score` refuses a prediction table.

Each card records its provenance. A question that cannot make a valid card (no text, a missing
or bad date, a deadline not after its as-of, a combination of questions) is listed in the
rejects with its reason, never dropped silently.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from worldsim.domain.cards import Card, parse_utc
from worldsim.domain.errors import CardError
from worldsim.domain.files import first_error, read_jsonl, write_files
from worldsim.domain.forecastbench import load_question_set
from worldsim.interop.question_set import (
    NaiveForecasts,
    Round,
    binary_endpoints,
    iso_utc,
    question_set_cards,
    round_of,
    slug,
)
from worldsim.scoring.inputs import read_csv

__all__ = [
    "PLAIN_OPTIONAL",
    "PLAIN_REQUIRED",
    "Imported",
    "Reject",
    "binary_endpoints",
    "card_yaml",
    "check_one_origin",
    "import_questions",
    "read_yaml",
    "slug",
    "write_imported",
]

REJECTS = "rejects.jsonl"
PLAIN_REQUIRED = ("question", "as_of", "deadline")
"""The columns of a plain question list (a CSV's header, a JSONL row's keys)."""
PLAIN_OPTIONAL = ("id", "background", "outcomes")
"""The columns a plain question list may have beside :data:`PLAIN_REQUIRED`."""
_CARD_SUFFIXES = (".yaml", ".yml", ".json")
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's, when PyYAML has it: twenty times faster on a round's 2,000 cards."""


@dataclass(frozen=True, slots=True)
class Reject:
    """A question that did not become a card: where it was (id or line) and why."""

    where: str
    reason: str


@dataclass(frozen=True, slots=True)
class Imported:
    """The cards a file gave, the questions it could not turn into cards, and the round (a
    ForecastBench question set's name and due date; None for a plain list)."""

    cards: tuple[Card, ...]
    rejects: tuple[Reject, ...]
    round: Round | None = None
    questions: int = 0

    def reasons(self) -> Counter[str]:
        """How many questions were rejected for each reason."""
        return Counter(r.reason for r in self.rejects)


def import_questions(path: str | Path, naive: NaiveForecasts | None = None) -> Imported:
    """Read a question file (see the module's doc); a file that is not a question set at all
    is a `CardError` naming it. ``naive``: ForecastBench's naive forecasts of the round's
    data-set questions, their cards' priors."""
    p = Path(path)
    suffix = p.suffix.lower()
    this: Round | None = None
    if suffix == ".json":
        p, doc = load_question_set(p)
        this = round_of(doc, p.name)
        made: Iterable[tuple[str, dict[str, Any] | str]] = question_set_cards(doc, p.name, naive)
        count = len(doc["questions"])
    elif suffix in (".jsonl", ".csv"):
        rows = _jsonl_rows(p) if suffix == ".jsonl" else _csv_rows(p)
        made, count = _plain(rows, p.name), len(rows)
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
            said = message if field == "(root)" else f"field '{field}': {message}"
            rejects.append(Reject(where, said))
            continue
        if card.id in cards:
            rejects.append(Reject(where, f"card id '{card.id}' given twice"))
            continue
        cards[card.id] = card
    return Imported(tuple(cards[k] for k in sorted(cards)), tuple(rejects), this, count)


def card_yaml(card: Card) -> bytes:
    """A card as the YAML file a user would write: id and question first, defaults left out."""
    data = card.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    data = {"id": card.id, "question": card.question, **data}
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True).encode("utf-8")


def write_imported(imported: Imported, out: Path, source: Path | None = None) -> list[Path]:
    """One YAML card per question in ``out`` and ``out/rejects.jsonl``, each written whole.

    ``out`` takes the cards of one question set only: a folder holding cards of another (a
    round's ``question_set`` name, else a file name) is refused before anything is written."""
    origin = _origin_of(imported, source)
    if origin is not None:
        _check_folder(out, origin)
    files: dict[Path, bytes] = {}
    for card in imported.cards:
        files[out / f"{card.id}.yaml"] = card_yaml(card)
    lines = [json.dumps({"where": r.where, "reason": r.reason}) + "\n" for r in imported.rejects]
    files[out / REJECTS] = "".join(lines).encode("utf-8")
    write_files(files)
    return sorted(files)


def _origin_of(imported: Imported, source: Path | None) -> str | None:
    if imported.round is not None:
        return imported.round.name
    return source.name if source is not None else None


def _check_folder(out: Path, origin: str) -> None:
    """Refuse ``out`` when a card in it came from another question set than ``origin``."""

    def card_origin(data: Any) -> str | None:
        provenance = data.get("provenance") if isinstance(data, dict) else None
        if not isinstance(provenance, dict):
            return None
        found = provenance.get("question_set") or provenance.get("source_file")
        return str(found) if found else None

    check_one_origin(out, origin, card_origin, "cards", "import each question set into a folder")


def check_one_origin(
    out: Path, origin: str, origin_of: Callable[[Any], str | None], what: str, advice: str
) -> None:
    """Refuse ``out`` when a YAML/JSON file in it came from elsewhere than ``origin`` (as
    ``origin_of`` reads a file's content): ``what`` it holds and the ``advice`` in the error."""
    if not out.is_dir():
        return
    for f in sorted(out.iterdir()):
        if not f.is_file() or f.suffix.lower() not in _CARD_SUFFIXES:
            continue
        theirs = origin_of(read_yaml(f))
        if theirs != origin:
            held = f"{what} of {theirs}" if theirs else f"{what} not made from it"
            raise CardError(
                f"holds {held} (e.g. {f.name}), not of {origin}: {advice} of its own", file=out
            )


def read_yaml(path: Path) -> Any:
    """A YAML (or JSON) file's content, None when it cannot be read; with libyaml's loader."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _not_text(row: Mapping[str, Any]) -> str | None:
    """Why a JSONL row's column holds no text (a number, a list, an object), if one does: an
    ``id`` may be a whole number."""
    for name in PLAIN_REQUIRED + PLAIN_OPTIONAL:
        value = row.get(name)
        if value is None or isinstance(value, str):
            continue
        if name == "id" and isinstance(value, int) and not isinstance(value, bool):
            continue
        return f"field '{name}': {type(value).__name__} is not text"
    return None


def _csv_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    header, rows = read_csv(path, PLAIN_REQUIRED, what="question list")
    for column in header:
        _check_column(column, path, 1)
    return _some([(f"line {n}", dict(row)) for n, row in rows], path)


def _jsonl_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    rows: list[tuple[str, dict[str, Any]]] = []
    for n, row in read_jsonl(path, what="question list"):
        for column in PLAIN_REQUIRED:
            if column not in row:
                raise CardError("missing column", file=path, field=column, line=n)
        for column in row:
            _check_column(column, path, n)
        rows.append((f"line {n}", row))
    return _some(rows, path)


def _check_column(column: str, path: Path, line: int) -> None:
    if column not in PLAIN_REQUIRED + PLAIN_OPTIONAL:
        known = ", ".join(PLAIN_REQUIRED + PLAIN_OPTIONAL)
        raise CardError(
            f"unknown column (a question list has {known})", file=path, field=column, line=line
        )


def _some(rows: list[tuple[str, dict[str, Any]]], path: Path) -> list[tuple[str, dict[str, Any]]]:
    if not rows:
        raise CardError("question list holds no questions", file=path)
    return rows


def _date_problem(row: Mapping[str, Any]) -> str:
    """Why ``as_of`` or ``deadline`` is no date, in the date parser's words."""
    for name in ("as_of", "deadline"):
        value = row.get(name)
        if not isinstance(value, str) or not value.strip():
            return f"field '{name}': missing"
        try:
            parse_utc(value.strip())
        except ValueError as exc:
            return f"field '{name}': {exc}"
    return "as_of and deadline must be ISO dates"  # pragma: no cover - one of them failed


def _plain(
    rows: Iterable[tuple[str, dict[str, Any]]], name: str
) -> Iterator[tuple[str, dict[str, Any] | str]]:
    for where, row in rows:
        wrong = _not_text(row)
        if wrong is not None:
            yield where, wrong
            continue
        text = _text(row.get("question"))
        if not text:
            yield where, "no question text"
            continue
        as_of, deadline = iso_utc(row.get("as_of")), iso_utc(row.get("deadline"))
        if as_of is None or deadline is None:
            yield where, _date_problem(row)
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
