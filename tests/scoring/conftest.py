"""Shared helpers: run the ``worldsim`` entry point in-process and write small input files."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support import Outcome, direct_trace, invoke

Runner = Callable[..., Outcome]


@pytest.fixture
def run() -> Runner:
    """Run ``worldsim ARGS...`` in-process (see :func:`tests.support.invoke`)."""
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
    p_yes: float | None = None,
    p_options: Mapping[str, float] | None = None,
    as_of: str = "2025-01-10T00:00:00Z",
    completed: bool = True,
    torn_tail: bool = False,
    route: str = "scripted/model",
    question: str | None = None,
    auxiliary: Sequence[str] = (),
    rationale: str = "scripted",
) -> Path:
    """A real trace (a direct forecast answered by a scripted model, see
    :func:`tests.support.direct_trace`): it verifies as any run's does."""
    return direct_trace(
        path,
        card_id=card_id,
        method=method,
        p_yes=p_yes,
        p_options=dict(p_options) if p_options is not None else None,
        as_of=as_of,
        completed=completed,
        torn_tail=torn_tail,
        route=route,
        question=question,
        auxiliary=tuple(auxiliary),
        rationale=rationale,
    )
