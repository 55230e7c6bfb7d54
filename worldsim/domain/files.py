"""Reading YAML and JSON input files into plain data, and turning pydantic errors into one line."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from worldsim.domain.errors import CardError, ConfigError

__all__ = [
    "first_error",
    "load_document",
    "load_mapping",
    "read_jsonl",
    "sha256_file",
    "write_files",
]


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that keeps timestamps as strings, so worldsim parses every date itself,
    and refuses a mapping that gives the same key twice (YAML would keep the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                continue  # the base class refuses an unhashable key with its own message
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _read_text(p: Path, what: str, error: type[ConfigError]) -> str:
    if not p.is_file():
        raise error(f"{what} not found", file=p)
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what}: {exc}", file=p) from None


def load_document(
    path: str | Path, *, what: str = "file", error: type[ConfigError] = CardError
) -> Any:
    """Read a YAML or JSON file (dates stay strings); raise ``error`` naming file and line."""
    p = Path(path)
    text = _read_text(p, what, error)
    try:
        if p.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.load(text, Loader=_StrictLoader)
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON: {exc.msg}", file=p, line=exc.lineno) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"malformed YAML: {problem}", file=p, line=line) from None


def read_jsonl(
    path: str | Path, *, what: str = "file", error: type[ConfigError] = CardError
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSONL file as (line number, object); a bad line names itself."""
    p = Path(path)
    for number, line in enumerate(_read_text(p, what, error).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"malformed JSON: {exc.msg}", file=p, line=number) from None
        if not isinstance(record, dict):
            raise error("each line must hold a JSON object", file=p, line=number)
        yield number, record


def load_mapping(
    path: str | Path, *, what: str = "file", error: type[ConfigError] = CardError
) -> dict[str, Any]:
    """Read a YAML or JSON file holding one mapping; raise ``error`` naming the file on failure."""
    data = load_document(path, what=what, error=error)
    if not isinstance(data, dict):
        raise error(f"{what} must hold a mapping at top level", file=path)
    return data


def first_error(exc: ValidationError) -> tuple[str, str]:
    """The dotted field path and message of a validation error's first entry."""
    err = exc.errors()[0]
    field = ".".join(str(part) for part in err["loc"]) or "(root)"
    message = err["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return field, message


def sha256_file(path: str | Path) -> str:
    """SHA-256 hex digest of a file's bytes."""
    import hashlib

    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_files(files: Mapping[Path, bytes]) -> None:
    """Write each file through a temporary sibling and an atomic rename."""
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
