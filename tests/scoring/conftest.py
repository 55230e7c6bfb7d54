"""Shared helpers: run the ``worldsim`` entry point in-process and write small input files."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from worldsim.cli import app
from worldsim.domain.errors import WorldsimError
from worldsim.trace.writer import seal_line


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


Runner = Callable[..., Outcome]


@pytest.fixture
def run() -> Runner:
    """Run ``worldsim ARGS...`` on the shared typer app.

    A worldsim error is rendered the way the console entry point renders it: its one-line
    ``str`` on standard error and its ``exit_code``.
    """

    def invoke(*args: str | Path) -> Outcome:
        result = CliRunner().invoke(app, [str(a) for a in args])
        exc = result.exception
        if isinstance(exc, WorldsimError):
            return Outcome(code=exc.exit_code, out=result.stdout, err=f"error: {exc}")
        if exc is not None and not isinstance(exc, SystemExit):
            raise exc
        return Outcome(code=result.exit_code, out=result.stdout, err=result.stderr)

    return invoke


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_trace(
    path: Path,
    *,
    card_id: str,
    method: str,
    run_id: str,
    p_yes: float | None = None,
    p_options: Mapping[str, float] | None = None,
    unresolved_mass: float = 0.0,
    as_of: str = "2025-01-10T00:00:00Z",
    completed: bool = True,
    torn_tail: bool = False,
    routes: Mapping[str, str] | None = None,
) -> Path:
    """A trace in the engine's envelope format, with a valid ``prev`` hash chain and seal."""
    kind = "binary" if p_options is None else "multiple_choice"
    endpoints = (
        [
            {"id": "yes", "title": "Yes", "polarity": "yes"},
            {"id": "no", "title": "No", "polarity": "no"},
        ]
        if p_options is None
        else [{"id": k, "title": k} for k in p_options]
    )
    card = {
        "id": card_id,
        "question": f"Will {card_id} happen?",
        "kind": kind,
        "as_of": as_of,
        "deadline": "2025-06-30T00:00:00Z",
        "endpoints": endpoints,
    }
    bodies: list[tuple[str, dict[str, Any]]] = [
        (
            "run_started",
            {
                "card": card,
                "method": method,
                "seed": 7,
                "routes": dict(routes or {"actor": "offline", "governance": "offline"}),
                "prompt_versions": {"actor": "a" * 12, "governance": "b" * 12},
                "extraction_rule": "path-ledger/1",
            },
        ),
        ("tick_started", {}),
        (
            "extraction",
            {
                "rule": "path-ledger/1",
                "p_yes": p_yes,
                "p_options": dict(p_options) if p_options is not None else None,
                "unresolved_mass": unresolved_mass,
            },
        ),
    ]
    if completed:
        bodies.append(("run_completed", {"seal": ""}))
    prev = hashlib.sha256(run_id.encode()).hexdigest()
    lines: list[str] = []
    for seq, (kind_name, data) in enumerate(bodies):
        record = {
            "v": 1,
            "seq": seq,
            "ts": "2025-01-10T00:00:00Z",
            "run": run_id,
            "type": kind_name,
            "tl": None,
            "tick": None,
            "prev": prev,
            "data": data,
        }
        raw = json.dumps(record, separators=(",", ":")).encode()
        if kind_name == "run_completed":
            raw = seal_line(raw)  # the writer seals the terminal record
        prev = hashlib.sha256(raw).hexdigest()
        lines.append(raw.decode() + "\n")
    text = "".join(lines)
    if torn_tail:
        text += '{"v": 1, "seq": 99, "type": "tick_sta'
    path.write_text(text, encoding="utf-8")
    return path
