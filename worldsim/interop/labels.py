"""Labels from a ForecastBench resolution set: each row becomes the label of the card
`worldsim cards import` made of its question.

A resolution set is an object with ``forecast_due_date``, ``question_set`` and ``resolutions``
(or a bare list of resolutions), each with ``id``, ``source``, ``direction``,
``resolution_date``, ``resolved_to`` and ``resolved``. One label is made per (id, source,
resolution date, direction), named after the card: ``<source>-<id>`` for a market question,
``<source>-<id>-<resolution_date>`` for a data-set question.

* A resolved row (``resolved_to`` 1 or 0) is a label ``yes`` / ``no`` resolved on its date.
* An unresolved market row is a **provisional** label: ``outcome: provisional`` with the
  market's value (``resolved_to``) as ``value`` and the row's date as ``valued_at``. ForecastBench
  scores such a question against that value; worldsim scores it by Brier only and never takes
  its date for a resolution date. A later resolution set of the round replaces it.
* Left, with the reason: a row missing ``id``, ``source``, ``resolution_date`` or ``resolved``,
  a ``resolution_date`` that is no ISO date or a ``resolved`` that is not a JSON boolean (the
  reason names the file's field; the row's date is checked before its card is looked for),
  combination rows (a list of ids and a direction; they have no card), an unresolved data-set
  row, a resolved value other than 0 or 1, a second row for a market
  question (the resolved one, else the latest, is kept), a row repeated, two rows of one
  question, source, date and direction that resolve it differently (both), and with ``cards``
  a question that is not among them.

Each label lists the resolution set's file name in ``sources`` and, when the set gives it, the
round's ``forecast_due_date`` (``score --forecastbench`` refuses a label of another round by
it). A folder takes the labels of one resolution set only: one holding labels from another is
refused before anything is written. A resolution set none of whose rows makes a label (no rows,
or none of them a resolution) is refused, and nothing is written.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from worldsim.domain.cards import parse_utc
from worldsim.domain.errors import CardError
from worldsim.domain.files import first_error, load_document, write_files
from worldsim.domain.forecastbench import MARKET_SOURCES, SOURCES, card_id_for, is_na
from worldsim.domain.labels import PROVISIONAL, Label
from worldsim.interop.question_set import COMBINATION, missing_fields
from worldsim.interop.questions import check_one_origin, read_yaml

__all__ = ["LabelImport", "cards_in", "import_labels"]

REJECTS = "rejects.jsonl"
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True, slots=True)
class LabelImport:
    """The labels a resolution set gave, by kind, and the rows left with their reasons."""

    labels: tuple[Label, ...]
    left: tuple[tuple[str, str], ...]
    """(where, reason) of each row that gave no label."""
    rows: int
    due: str | None

    def kinds(self) -> Counter[str]:
        """Labels by kind: ``resolved market``, ``resolved data-set``, ``provisional market``."""
        out: Counter[str] = Counter()
        for label in self.labels:
            market = label.card_id.split("-", 1)[0] in MARKET_SOURCES
            kind = "provisional" if label.provisional else "resolved"
            out[f"{kind} {'market' if market else 'data-set'}"] += 1
        return out

    def reasons(self) -> Counter[str]:
        return Counter(reason for _, reason in self.left)


@dataclass(frozen=True, slots=True)
class _Row:
    where: str
    key: tuple[str, str, str, str]  # source, id, date, direction
    card_id: str
    data: dict[str, Any]


def import_labels(
    path: str | Path,
    out: Path,
    cards: Collection[str] | None = None,
    cards_due: str | None = None,
) -> LabelImport:
    """Read a resolution set and write one label file per row that makes one into ``out``,
    with ``out/rejects.jsonl`` (see the module). ``cards``: the card ids labels may name, of
    the round due on ``cards_due`` (a resolution set of another round is refused)."""
    p = Path(path)
    doc = load_document(p, what="resolution set")
    items = doc.get("resolutions") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise CardError("expected a list of resolutions (or an object with 'resolutions')", file=p)
    due = _due_date(doc.get("forecast_due_date") if isinstance(doc, dict) else None, p)
    if cards_due and due and due != cards_due:
        raise CardError(
            f"resolves the round due {due}, but the cards are of the round due {cards_due}",
            file=p,
            field="forecast_due_date",
        )
    left: list[tuple[str, str]] = []
    kept: dict[str, _Row] = {}
    seen: dict[tuple[str, str, str, str], _Row] = {}
    contradicted: set[tuple[str, str, str, str]] = set()
    for i, item in enumerate(items):
        where = f"resolutions.{i}"
        made = _row(item, where, p.name, due)
        if isinstance(made, str):
            left.append((where, made))
            continue
        earlier = seen.get(made.key)
        if earlier is not None:
            if earlier.data == made.data:
                left.append((where, "a row repeated (same id, source, date and direction)"))
            else:  # two answers to one question: neither is taken
                contradicted.add(made.key)
                left.append(
                    (
                        where,
                        f"contradicts {earlier.where} (same id, source, date and "
                        "direction, another resolution): neither is kept",
                    )
                )
            continue
        seen[made.key] = made
        if cards is not None and made.card_id not in cards:
            left.append((where, "no card of this question among the cards given"))
            continue
        other = kept.get(made.card_id)
        if other is not None:
            first, second = sorted((other, made), key=_preference)
            kept[made.card_id] = second
            left.append((first.where, f"another row of market question '{made.card_id}' kept"))
            continue
        kept[made.card_id] = made
    for card_id, row in list(kept.items()):
        if row.key in contradicted:
            del kept[card_id]
            left.append((row.where, "contradicted by a later row: neither is kept"))
    labels: list[Label] = []
    for card_id in sorted(kept):
        try:
            labels.append(Label.model_validate(kept[card_id].data))
        except ValidationError as exc:
            field, message = first_error(exc)
            left.append((kept[card_id].where, f"field '{field}': {message}"))
    if not labels:  # nothing to score against: nothing is written
        reasons = Counter(r for _, r in left).most_common()
        listed = "; ".join(f"{n} {reason}" for reason, n in reasons)
        raise CardError(
            f"none of its {len(items)} row(s) makes a label" + (f": {listed}" if listed else ""),
            file=p,
            field="resolutions",
        )
    _check_folder(out, p.name)
    files: dict[Path, bytes] = {}
    for label in labels:
        data = label.model_dump(mode="json", exclude_defaults=True)
        data = {"card_id": label.card_id, **data}
        text = yaml.dump(data, Dumper=_DUMPER, sort_keys=False)
        files[out / f"{label.card_id}.yaml"] = text.encode()
    lines = "".join(json.dumps({"where": w, "reason": r}) + "\n" for w, r in left)
    files[out / REJECTS] = lines.encode("utf-8")
    write_files(files)
    return LabelImport(tuple(labels), tuple(left), len(items), due)


def _due_date(value: object, path: Path) -> str | None:
    """The resolution set's ``forecast_due_date`` as ``YYYY-MM-DD`` (None when it gives none);
    one that is no date is refused."""
    if is_na(value):
        return None
    day = str(value).strip()[:10]
    try:
        parse_utc(day)
    except ValueError:
        raise CardError(
            f"not a YYYY-MM-DD date: {value!r}", file=path, field="forecast_due_date"
        ) from None
    return day


def _preference(row: _Row) -> tuple[bool, str]:
    """Of two rows of one market question the later in this order is kept: resolved over
    provisional, then the later date."""
    return row.data["outcome"] != PROVISIONAL, row.key[2]


def _row(item: object, where: str, file_name: str, due: str | None) -> _Row | str:
    if not isinstance(item, Mapping):
        return "not an object"
    raw_id, direction = item.get("id"), item.get("direction")
    if isinstance(raw_id, list) or (isinstance(direction, list) and direction):
        return COMBINATION
    qid, source = _text(raw_id), _text(item.get("source")).lower()
    date = _text(item.get("resolution_date"))[:10]
    missing = missing_fields({"id": qid, "source": source, "resolution_date": date})
    if missing:
        return missing
    if source not in SOURCES:
        return f"unknown source '{source}'"
    try:
        parse_utc(date)
    except ValueError as exc:
        return f"field 'resolution_date': {exc}"
    resolved = item.get("resolved")
    if resolved is None:
        return "field 'resolved': missing"
    if not isinstance(resolved, bool):
        return f"field 'resolved': not a boolean ({resolved!r})"
    market = source in MARKET_SOURCES
    value = item.get("resolved_to")
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    card_id = card_id_for(source, qid, None if market else date)
    data: dict[str, Any] = {"card_id": card_id, "sources": [file_name]}
    if due is not None:
        data["forecast_due_date"] = due
    if resolved:
        if number not in (0, 1):
            return f"resolved to {value!r}, neither 0 nor 1"
        data |= {"outcome": "yes" if number == 1 else "no", "resolved_at": date}
    elif not market:
        return "a data-set question not resolved yet"
    elif number is None or not 0.0 <= number <= 1.0:
        return f"an unresolved market without a value in [0, 1] ({value!r})"
    else:
        data |= {"outcome": PROVISIONAL, "value": float(number), "valued_at": date}
    return _Row(where, (source, qid, date, ""), card_id, data)


def _text(value: object) -> str:
    return "" if is_na(value) else str(value).strip()


def _check_folder(out: Path, name: str) -> None:
    """Refuse ``out`` when a label in it came from another resolution set than ``name``."""

    def label_origin(data: Any) -> str | None:
        sources = data.get("sources") if isinstance(data, dict) else None
        return str(sources[0]) if isinstance(sources, list) and sources else None

    check_one_origin(out, name, label_origin, "labels", "put each round's labels in a folder")


def cards_in(folder: Path) -> tuple[set[str], str | None]:
    """The card ids of a folder of imported cards (its YAML files' names) and their round's due
    date (the first card's ``provenance.forecast_due_date``), for `import_labels`' ``cards``."""
    if not folder.is_dir():
        raise CardError("--cards must be a folder of cards", file=folder)
    files = sorted(f for f in folder.glob("*.yaml") if f.is_file())
    if not files:
        raise CardError("no cards (.yaml) in this folder", file=folder)
    data = read_yaml(files[0])
    provenance = data.get("provenance") if isinstance(data, dict) else None
    due = None
    if isinstance(provenance, dict) and provenance.get("forecast_due_date"):
        due = str(provenance["forecast_due_date"])[:10]
    return {f.stem for f in files}, due
