"""Helpers shared by the tests (fixtures live in conftest.py)."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from worldsim.domain.cards import Card
from worldsim.trace.writer import SEALED_TYPES, genesis_hash, seal_line

ROOT = Path(__file__).resolve().parent.parent
DEMO_CARD = ROOT / "scenarios" / "merger-review.yaml"


def cli_command_paths() -> list[tuple[str, ...]]:
    """Every command and subcommand of the CLI, e.g. ('run',), ('hindsight', 'ker')."""
    import typer.main

    from worldsim.cli import app

    paths: list[tuple[str, ...]] = []
    for name, command in typer.main.get_group(app).commands.items():
        paths.append((name,))
        paths.extend((name, sub) for sub in getattr(command, "commands", {}))
    return paths


def run_on_stub(
    base_url: str, out: Path, *args: str, card: Path = DEMO_CARD
) -> subprocess.CompletedProcess[str]:
    """``worldsim run CARD --model stub/test-model --no-preflight --out OUT ARGS`` through
    the entry point in a fresh interpreter, against the server at ``base_url`` (key ``k``),
    with its response cache in ``OUT/cache``."""
    run = ["run", str(card), "--model", "stub/test-model", "--no-preflight", "--out", str(out)]
    return cli_on_stub(base_url, out / "cache", *run, *args)


def cli_on_stub(base_url: str, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``worldsim ARGS`` through the entry point in a fresh interpreter, with the stub
    route's server at ``base_url`` (key ``k``) and the response cache in ``cache``."""
    env = {
        **os.environ,
        "STUB_API_KEY": "k",
        "STUB_BASE_URL": base_url,
        "WORLDSIM_CACHE_DIR": str(cache),
    }
    return subprocess.run(
        [sys.executable, "-c", "from worldsim.cli import main; main()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def card_with(card: Card, **seed_changes: Any) -> Card:
    """A copy of ``card`` with some seed fields replaced (validated again)."""
    data = card.model_dump(mode="json")
    data["seeds"].update(seed_changes)
    return Card.model_validate(data)


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def invoke(*args: str | Path) -> Outcome:
    """``worldsim ARGS`` in-process on the shared typer app.

    A worldsim error is rendered the way the console entry point renders it: its one-line
    ``str`` on standard error and its ``exit_code``.
    """
    from typer.testing import CliRunner

    from worldsim.cli import app
    from worldsim.domain.errors import WorldsimError

    result = CliRunner().invoke(app, [str(a) for a in args])
    exc = result.exception
    if isinstance(exc, WorldsimError):
        return Outcome(exc.exit_code, result.stdout, f"error: {exc}")
    if exc is not None and not isinstance(exc, SystemExit):
        raise exc
    return Outcome(result.exit_code, result.stdout, result.stderr)


Edit = Callable[[list[dict[str, Any]]], None]


def kill_job(study: Path, trace: Path, keep: int) -> None:
    """Leave a study's job as a kill mid-run would: its trace's first ``keep`` lines, and no
    line in the job log (which hears of a job only once it ended)."""
    lines = trace.read_bytes().splitlines(keepends=True)
    trace.write_bytes(b"".join(lines[:keep]))
    name = trace.relative_to(study).as_posix()
    log = study / "jobs.jsonl"
    logged = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(ln for ln in logged if json.loads(ln)["trace"] != name))


def cut_mid_run(source: Path, target: Path) -> Path:
    """Write to ``target`` the lines of the trace ``source`` up to its middle committed tick:
    a run cut off there (no terminal record), to restore or resume."""
    lines = source.read_bytes().splitlines(keepends=True)
    committed = [i for i, line in enumerate(lines) if b'"type":"tick_committed"' in line[:200]]
    target.write_bytes(b"".join(lines[: committed[len(committed) // 2] + 1]))
    return target


def forge(
    source: Path,
    target: Path,
    edit: Edit,
    *,
    respell: int | None = None,
    rewrite: Callable[[bytes], bytes] | None = None,
) -> None:
    """Apply ``edit`` to the parsed records, then renumber, re-chain and reseal every line as
    the writer would: the forged trace is internally consistent. ``respell`` is the ``seq``
    (0-based) of a record written otherwise than the writer would: with spaces after its
    separators, or ``rewrite`` applied to its bytes (give an unsealed one: a seal covers the
    writer's bytes)."""
    records = [json.loads(raw) for raw in source.read_bytes().splitlines()]
    edit(records)
    prev = genesis_hash(records[0]["run"])
    lines: list[bytes] = []
    for seq, obj in enumerate(records):
        obj["seq"], obj["prev"] = seq, prev
        if obj["type"] in SEALED_TYPES:
            obj["data"].update(seal="", signature="")
        spaced = seq == respell and rewrite is None
        separators = (", ", ": ") if spaced else (",", ":")
        line = json.dumps(obj, separators=separators, ensure_ascii=False).encode()
        if seq == respell and rewrite is not None:
            line = rewrite(line)
        if obj["type"] in SEALED_TYPES:
            line = seal_line(line)
        lines.append(line)
        prev = hashlib.sha256(line).hexdigest()
    target.write_bytes(b"".join(line + b"\n" for line in lines))


@contextlib.contextmanager
def collector_paces(
    monkeypatch: pytest.MonkeyPatch, owner: object, name: str
) -> Iterator[list[int]]:
    """Inside, the collector at the interpreter's default pace (a young collection every 700
    allocations) unless code paces it; yields the young threshold seen at each call of
    ``owner.name`` (a function of a module, looked up there when called)."""
    seen: list[int] = []
    original = getattr(owner, name)

    def noted(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold()[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, noted)
    before = gc.get_threshold()
    gc.set_threshold(700, *before[1:])
    try:
        yield seen
    finally:
        gc.set_threshold(*before)


def direct_trace(
    path: Path,
    *,
    card_id: str,
    method: str,
    p_yes: float | None = None,
    p_options: dict[str, float] | None = None,
    as_of: str = "2025-01-10T00:00:00Z",
    question: str | None = None,
    auxiliary: tuple[str, ...] | list[str] = (),
    route: str = "scripted/model",
    rationale: str = "scripted",
    completed: bool = True,
    torn_tail: bool = False,
) -> Path:
    """A real trace at ``path``: a direct forecast of a small card, answered by a scripted
    model with ``p_yes`` (or, for a multiple-choice card, ``p_options``), written by the engine
    and so verifying as any run's. ``completed=False`` cuts it before its final record;
    ``torn_tail`` adds a torn line after it."""
    import anyio

    from worldsim.sim.direct import forecast_card
    from worldsim.testing import ScriptedModel

    endpoints: list[dict[str, Any]] = (
        [
            {"id": "yes", "title": "Yes", "polarity": "yes"},
            {"id": "no", "title": "No", "polarity": "no"},
        ]
        if p_options is None
        else [{"id": k, "title": k} for k in p_options]
    )
    endpoints += [{"id": a, "title": a, "kind": "auxiliary"} for a in auxiliary]
    card = Card.model_validate(
        {
            "id": card_id,
            "question": question or f"Will {card_id} happen?",
            "kind": "binary" if p_options is None else "multiple_choice",
            "as_of": as_of,
            "deadline": "2025-06-30T00:00:00Z",
            "endpoints": endpoints,
        }
    )
    reply: dict[str, Any] = {"rationale": rationale, "leakage_warning": False}
    if p_options is None:
        reply["p_yes"] = p_yes
    else:
        reply["probabilities"] = [{"endpoint": k, "p": v} for k, v in p_options.items()]
    model = ScriptedModel([reply], route=route)
    anyio.run(
        lambda: forecast_card(
            card,
            model=model,
            route=route,
            method=method,
            seed=7,
            fsync=False,
            overwrite=True,
            trace_path=path,
        )
    )
    if not completed:
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))
    if torn_tail:
        with path.open("ab") as fh:
            fh.write(b'{"v":2,"seq":99,"type":"tick_sta')
    return path
