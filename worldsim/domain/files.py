"""Reading YAML and JSON input files into plain data, and turning pydantic errors into one line.

Every input file is held to the documented limits before its data is used (docs/limits.md):
at most ``bounds.MAX_INPUT_BYTES``, UTF-8 (a byte-order mark is skipped), and lists and mappings
nested at most ``bounds.MAX_NESTING`` deep, so no later step can hit Python's recursion limit.
Outputs are written by :mod:`worldsim.domain.paths` (``write_files``, re-exported here).
"""

from __future__ import annotations

import csv
import difflib
import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from worldsim.domain import bounds
from worldsim.domain.errors import CardError, ConfigError
from worldsim.domain.paths import check_folder_target, missing_file, write_files

__all__ = [
    "check_folder_target",
    "check_size",
    "csv_rows",
    "files_in",
    "first_error",
    "load_document",
    "load_mapping",
    "load_model",
    "missing_file",
    "read_jsonl",
    "sha256_file",
    "validated",
    "write_files",
]


#: libyaml's parser where PyYAML was built with it (several times faster on a large card), else
#: PyYAML's own; either way the safe constructor and resolver below.
_SafeBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeBase):  # type: ignore[valid-type,misc]
    """A YAML loader that keeps timestamps as strings, so worldsim parses every date itself,
    reads only ``true`` and ``false`` as booleans (YAML 1.2), and refuses a mapping that gives
    the same key twice (YAML would keep the last silently).

    A mapping without merge keys is built in one pass over its keys and values; a plain
    scalar's tag is worked out once per text (a card repeats the same few words and numbers)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._tags: dict[tuple[str, tuple[bool, bool]], str] = {}

    def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
        if kind is not yaml.ScalarNode:
            tag: str = super().resolve(kind, value, implicit)
            return tag
        key = (value, implicit)
        tag = self._tags.get(key)  # type: ignore[assignment]
        if tag is None:
            tag = self._tags[key] = super().resolve(kind, value, implicit)
        return tag

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode) or any(
            key_node.tag in _SPECIAL_KEYS for key_node, _ in node.value
        ):
            return self._checked_mapping(node, deep)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                seen = key in mapping
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                ) from None
            if seen:
                raise _duplicate(key, key_node)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def _checked_mapping(self, node: yaml.MappingNode, deep: bool) -> dict[Any, Any]:
        """A mapping with merge keys: its keys as written checked, then PyYAML's merge."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                continue  # the base class refuses an unhashable key with its own message
            if key in seen:
                raise _duplicate(key, key_node)
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_SPECIAL_KEYS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


def _duplicate(key: Any, key_node: yaml.Node) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(
        None, None, f"duplicate key {key!r}", key_node.start_mark
    )


_BOOL = "tag:yaml.org,2002:bool"
_TRUE_OR_FALSE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
"""YAML 1.2's booleans: ``yes``, ``no``, ``on`` and ``off`` stay words (``cache: off``,
``polarity: yes``), as YAML 1.2 reads them; PyYAML follows YAML 1.1, where they are booleans."""

_StrictLoader.yaml_implicit_resolvers = {
    key: [
        (tag, _TRUE_OR_FALSE if tag == _BOOL else rx)
        for tag, rx in resolvers
        if tag != "tag:yaml.org,2002:timestamp"
    ]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


def check_size(p: Path, what: str, error: type[ConfigError] = CardError) -> None:
    """Refuse a missing input file, or one larger than ``bounds.MAX_INPUT_BYTES``."""
    try:
        size = p.stat().st_size if p.is_file() else None
    except OSError:
        size = None
    if size is None:
        raise missing_file(p, what, error)
    if size > bounds.MAX_INPUT_BYTES:
        limit = bounds.MAX_INPUT_BYTES // (1024 * 1024)
        raise error(f"{what} is {size / 2**20:.0f} MiB, over the {limit} MiB limit", file=p)


def _read_text(p: Path, what: str, error: type[ConfigError]) -> str:
    check_size(p, what, error)
    try:
        return p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what}: {exc}", file=p) from None


def _too_deep(data: Any) -> tuple[bool, str | None]:
    """Whether lists and mappings nest deeper than ``bounds.MAX_NESTING`` (or form a cycle,
    which YAML aliases can build), and the top-level key under which they do.

    Iterative, and each container is walked again only when reached at a greater depth, so
    shared YAML aliases cost no more than the text that names them.
    """
    deepest: dict[int, int] = {}
    stack: list[tuple[Any, int, str | None]] = [(data, 1, None)]
    while stack:
        node, depth, top = stack.pop()
        if depth > bounds.MAX_NESTING:
            return True, top
        if deepest.get(id(node), 0) >= depth:
            continue
        deepest[id(node)] = depth
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, str(key) if top is None else top))
    return False, None


def _check_nesting(data: Any, p: Path, error: type[ConfigError], line: int | None = None) -> None:
    if not isinstance(data, dict | list):
        return
    deep, top = _too_deep(data)
    if deep:
        raise error(
            f"data nested deeper than {bounds.MAX_NESTING} levels", file=p, field=top, line=line
        )


def _parse(text: str, p: Path, error: type[ConfigError]) -> Any:
    kind = "JSON" if p.suffix.lower() == ".json" else "YAML"
    try:
        if kind == "JSON":
            return json.loads(text)
        return yaml.load(text, Loader=_StrictLoader)
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON: {_json_problem(exc)}", file=p, line=exc.lineno) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if problem == _LIBYAML_TOO_DEEP:  # libyaml's own bound, far beyond ours
            raise error(
                f"data nested deeper than {bounds.MAX_NESTING} levels", file=p, line=line
            ) from None
        raise error(f"malformed YAML: {problem}", file=p, line=line) from None
    except RecursionError:
        raise error(f"data nested deeper than {bounds.MAX_NESTING} levels", file=p) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise error(f"malformed {kind}: {_first_sentence(exc)}", file=p) from None


def _json_problem(exc: json.JSONDecodeError) -> str:
    """The decoder's message with its column: some messages ("Unterminated string starting
    at") end where the position was."""
    if exc.msg.endswith(" at"):
        return f"{exc.msg} column {exc.colno}"
    return f"{exc.msg} (column {exc.colno})"


def _first_sentence(exc: Exception) -> str:
    return str(exc).split(": value has")[0].split("; use")[0].splitlines()[0]


def load_document(
    path: str | Path, *, what: str = "file", error: type[ConfigError] = CardError
) -> Any:
    """Read a YAML or JSON file (dates stay strings); raise ``error`` naming file and line."""
    p = Path(path)
    data = _parse(_read_text(p, what, error), p, error)
    _check_nesting(data, p, error)
    return data


def read_jsonl(
    path: str | Path, *, what: str = "file", error: type[ConfigError] = CardError
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSONL file as (line number, object); a bad line names itself,
    as does an object giving the same key twice (JSON would keep the last silently)."""
    p = Path(path)
    for number, line in enumerate(_read_text(p, what, error).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, object_pairs_hook=_once_each)
        except _RepeatedKey as exc:
            raise error(f"duplicate key {exc.key!r}", file=p, line=number) from None
        except json.JSONDecodeError as exc:
            raise error(f"malformed JSON: {_json_problem(exc)}", file=p, line=number) from None
        except RecursionError:
            raise error(
                f"data nested deeper than {bounds.MAX_NESTING} levels", file=p, line=number
            ) from None
        except ValueError as exc:
            raise error(f"malformed JSON: {_first_sentence(exc)}", file=p, line=number) from None
        if not isinstance(record, dict):
            raise error("each line must hold a JSON object", file=p, line=number)
        _check_nesting(record, p, error, line=number)
        yield number, record


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object from its pairs, refusing a key given twice."""
    made = dict(pairs)
    if len(made) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return made


def load_mapping(
    path: str | Path, *, what: str = "file", error: type[ConfigError] = CardError
) -> dict[str, Any]:
    """Read a YAML or JSON file holding one mapping; raise ``error`` naming the file on failure."""
    data = load_document(path, what=what, error=error)
    if not isinstance(data, dict):
        raise error(f"{what} must hold a mapping at top level", file=path)
    return data


M = TypeVar("M", bound=BaseModel)


def validated(
    model: type[M],
    data: Any,
    *,
    file: str | Path,
    error: type[ConfigError] = CardError,
    line: int | None = None,
) -> M:
    """``data`` as a ``model``; its first problem raises ``error`` naming the file (and line)
    and the field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise error(message, file=file, field=field, line=line) from None


def load_model(
    path: str | Path, model: type[M], *, what: str, error: type[ConfigError] = CardError
) -> M:
    """The YAML or JSON mapping at ``path`` as a ``model`` (:func:`load_mapping`,
    :func:`validated`)."""
    return validated(model, load_mapping(path, what=what, error=error), file=path, error=error)


_UNION_TAG = re.compile(
    r"^((constrained|function|lax|strict)-[\w-]+|[\w-]+\[.*\]|float|int|str|bool)$"
)
"""Pydantic's names of union members in an error's location."""


_NAMED = re.compile(r"([A-Za-z_]\w*(?:\.\w+)*): (.+)", re.DOTALL)
"""A whole-model check's message that names its field first (``seeds.relations: ...``)."""


def first_error(exc: ValidationError) -> tuple[str, str]:
    """The dotted field path and message of a validation error's first entry."""
    errors = exc.errors()
    err = errors[0]
    parts = [str(part) for part in err["loc"]]
    # a union's error names the member it tried (``constrained-float``, ``dict[str,float]``):
    # a type, not a field, so it is left out of the path
    field = ".".join(part for part in parts if not _UNION_TAG.match(part))
    message = err["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if err["type"] == "missing" and parts:
        # a required field missing beside one that is not a field: most often a misspelling
        given = [
            str(e["loc"][-1])
            for e in errors
            if e["type"] == "extra_forbidden" and tuple(e["loc"][:-1]) == tuple(err["loc"][:-1])
        ]
        near = difflib.get_close_matches(parts[-1], given, n=1, cutoff=0.6)
        if near:
            message += f" ('{near[0]}' is given, which is not a field: a misspelling?)"
    if not field:
        # a whole-model check names the field it is about first: "deadline: must be after as_of"
        named = _NAMED.match(message)
        if named is None:
            return "(root)", message
        field, message = named.groups()
    return field, message


def sha256_file(path: str | Path) -> str:
    """SHA-256 hex digest of a file's bytes."""
    import hashlib

    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def csv_rows(
    lines: Iterable[str], path: Path, *, strict: bool = False
) -> tuple[list[str], Iterator[tuple[int, dict[str, str | None]]]]:
    """The header of CSV ``lines`` and a reader of its rows (the line a row ends on, its cells
    by column; ``None`` for a cell the row lacks, and under ``None`` the cells beyond the
    header), for every CSV input to share.

    A cell longer than ``bounds.MAX_CSV_CELL_CHARS`` is refused naming the file, the line and
    its column, a column named twice in the header naming it, and a malformed line (``strict``
    quoting) naming the file and the line: never the csv module's own error, whose field limit
    is global and names nothing.
    """
    # the csv module's limit is the process's: raise it past ours, so that ours can name
    # the column (a whole input file is the longest cell it could ever be asked to read)
    if csv.field_size_limit() < bounds.MAX_INPUT_BYTES:
        csv.field_size_limit(bounds.MAX_INPUT_BYTES)
    reader = csv.DictReader(lines, strict=strict)
    try:
        header = list(reader.fieldnames or [])
    except csv.Error as exc:
        raise CardError(f"malformed CSV: {exc}", file=path, line=1) from None
    _check_cells(dict(enumerate(header)), path, 1)
    named = [name for name in header if name.strip()]
    twice = next((name for i, name in enumerate(named) if name in named[:i]), None)
    if twice is not None:  # the reader would keep the last such column's cells only
        raise CardError("column given twice in the header", file=path, field=twice, line=1)

    def rows() -> Iterator[tuple[int, dict[str, str | None]]]:
        try:
            for row in reader:
                _check_cells(row, path, reader.line_num)
                yield reader.line_num, row
        except csv.Error as exc:
            # line_num counts the lines read before the one that failed
            raise CardError(f"malformed CSV: {exc}", file=path, line=reader.line_num + 1) from None

    return header, rows()


def _check_cells(row: Mapping[Any, Any], path: Path, line: int) -> None:
    for column, value in row.items():
        cells = value if isinstance(value, list) else [value]
        for cell in cells:
            if isinstance(cell, str) and len(cell) > bounds.MAX_CSV_CELL_CHARS:
                raise CardError(
                    f"a cell of {len(cell):,} characters, over the limit of "
                    f"{bounds.MAX_CSV_CELL_CHARS:,} (docs/limits.md)",
                    file=path,
                    line=line,
                    field=column if isinstance(column, str) else None,
                )


def files_in(folder: Path, suffixes: Collection[str], refusal: str) -> list[Path]:
    """The files under ``folder`` (at any depth) whose suffix, in any case, is one of
    ``suffixes``, sorted; a folder that holds none is a CardError naming it with ``refusal``."""
    found = sorted(f for f in folder.rglob("*") if f.is_file() and f.suffix.lower() in suffixes)
    if not found:
        raise CardError(refusal, file=folder)
    return found
