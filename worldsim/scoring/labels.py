"""Reading private labels: CSV, JSONL, a YAML/JSON list, or a folder of per-card label files.

Each label is validated as a :class:`worldsim.domain.cards.Label`; its outcome is normalised there
(``yes``/``no``, ``1``/``0``, ``true``/``false``) or kept as a multiple-choice option id.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsim.domain.errors import CardError
from worldsim.domain.files import files_in, load_document, load_mapping, read_jsonl, validated
from worldsim.domain.labels import Label
from worldsim.scoring.inputs import read_csv

__all__ = ["LabelEntry", "LabelSet", "label_files", "load_labels"]

_LABEL_SUFFIXES = frozenset({".yaml", ".yml", ".json"})


@dataclass(frozen=True, slots=True)
class LabelEntry:
    """One validated label and where it was read, for error messages."""

    label: Label
    file: str
    line: int | None

    @property
    def outcome(self) -> str:
        return self.label.outcome

    def refuse(self, message: str, field: str = "outcome") -> CardError:
        """The error for a label that cannot score the forecast: it names the label's file,
        line and ``field`` (its ``outcome`` unless told)."""
        return CardError(message, file=self.file, field=field, line=self.line)


@dataclass(frozen=True, slots=True)
class LabelSet:
    """Labels by card id, and the files they came from (hashed into the score output)."""

    entries: Mapping[str, LabelEntry]
    files: tuple[Path, ...]


def label_files(path: str | Path) -> list[Path]:
    """The files a labels argument names: the file itself, or a folder's YAML/JSON files."""
    p = Path(path)
    if p.is_dir():
        return files_in(p, _LABEL_SUFFIXES, "labels folder holds no .yaml, .yml or .json files")
    if not p.is_file():
        raise CardError("labels file not found", file=p)
    return [p]


def load_labels(path: str | Path) -> LabelSet:
    """Read labels from a file or folder; a duplicated card id or bad outcome names the file."""
    files = label_files(path)
    entries: dict[str, LabelEntry] = {}
    folder = Path(path).is_dir()
    for f in files:
        records = _folder_file_records(f) if folder else _file_records(f)
        for line, record in records:
            entry = LabelEntry(label=_validate(record, f, line), file=str(f), line=line)
            previous = entries.get(entry.label.card_id)
            if previous is not None:
                where = (
                    previous.file if previous.line is None else f"{previous.file}:{previous.line}"
                )
                raise CardError(
                    f"duplicate label for card '{entry.label.card_id}' (first in {where})",
                    file=f,
                    field="card_id",
                    line=line,
                )
            entries[entry.label.card_id] = entry
    if not entries:
        raise CardError("no labels found", file=path)
    return LabelSet(entries=entries, files=tuple(files))


def _validate(record: Mapping[str, Any], path: Path, line: int | None) -> Label:
    return validated(Label, record, file=path, line=line)


def _folder_file_records(path: Path) -> Iterator[tuple[int | None, dict[str, Any]]]:
    yield None, load_mapping(path, what="label")


def _file_records(path: Path) -> Iterator[tuple[int | None, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        yield from _csv_records(path)
    elif suffix == ".jsonl":
        yield from _jsonl_records(path)
    elif suffix in _LABEL_SUFFIXES:
        yield from _document_records(path)
    else:
        raise CardError("labels must be .csv, .jsonl, .yaml, .yml or .json", file=path)


def _csv_records(path: Path) -> Iterator[tuple[int | None, dict[str, Any]]]:
    _, rows = read_csv(path, ("card_id", "outcome"), what="labels")
    for line, cells in rows:
        record: dict[str, Any] = dict(cells)
        if "sources" in record:
            record["sources"] = [s.strip() for s in record["sources"].split(";") if s.strip()]
        yield line, record


def _jsonl_records(path: Path) -> Iterator[tuple[int | None, dict[str, Any]]]:
    yield from read_jsonl(path, what="labels")


def _document_records(path: Path) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """A YAML/JSON file holding one label mapping or a list of them."""
    data = load_document(path, what="labels")
    if isinstance(data, dict):
        yield None, data
        return
    if not isinstance(data, list):
        raise CardError("labels file must hold a mapping or a list of mappings", file=path)
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise CardError("label entry is not a mapping", file=path, field=f"[{i}]")
        yield None, item
