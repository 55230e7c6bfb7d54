"""Score and hindsight read a resumed trace through the one reader: void records never count.

A run is cut off in the middle of a tick, after the tick had already logged a gateway access
(here: a document the hindsight graph does not cite). The resumed run voids that tick and runs
it again. Read naively, line by line, the voided access would lower source precision; read
through the trace reader's effective view, the resumed trace scores exactly like the
uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from tests.support import DEMO_CARD, ROOT
from worldsim.cli import app
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.hindsight.evidence import source_precision
from worldsim.scoring.hindsight.forecast import RecordView, extract_forecast, trace_records
from worldsim.scoring.hindsight.graph import load_hindsight
from worldsim.scoring.inputs import rows_from_trace
from worldsim.sim.resuming import resume_run
from worldsim.sim.session import run_card
from worldsim.trace.reader import iter_effective, read_trace
from worldsim.trace.verify import canonical_hash, verify_trace
from worldsim.trace.writer import TraceWriter

GRAPH = ROOT / "scenarios" / "hindsight" / "merger-review.json"
LABELS = ROOT / "scenarios" / "labels" / "merger-review.yaml"
UNCITED = "mr-f01"  # in the card's evidence, cited by no hindsight event


def _naive_records(path: Path) -> list[RecordView]:
    """Every line of the file, voided or not: what a reader without the effective view sees."""
    records = []
    for raw in path.read_bytes().splitlines():
        obj: dict[str, Any] = json.loads(raw)
        records.append(RecordView(obj["type"], obj["tl"], obj["tick"], obj["data"], obj["run"]))
    return records


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(uninterrupted trace, the same run cut mid-tick with a logged access, then resumed)."""
    out = tmp_path_factory.mktemp("resumed")
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=6)
    whole = anyio.run(lambda: run_card(config, out / "whole", fsync=False)).trace
    trace = read_trace(whole)
    # cut after the first proposal of tick 2 on t0: that tick never committed
    cut = next(
        line
        for line in trace.lines
        if line.type == "proposals" and (line.tl, line.tick) == ("t0", 2)
    )
    resumed = out / "cut" / whole.name
    resumed.parent.mkdir()
    shutil.copyfile(whole, resumed)
    keep = sum(len(line.raw) + 1 for line in trace.lines[: cut.number])

    async def crash_after_a_retrieval() -> None:
        writer = await TraceWriter.append_to(
            resumed,
            trace.run_id,
            seq=cut.number,
            prev=hashlib.sha256(cut.raw).hexdigest(),
            keep_bytes=keep,
            fsync=False,
        )
        await writer.emit(
            "retrievals",
            {
                "cutoff": trace.started.card["as_of"],
                "accesses": [
                    {
                        "agent": cut.fields["proposals"][0]["agent"],
                        "tool": "open_document",
                        "doc_id": UNCITED,
                        "doc_ids": [UNCITED],
                    }
                ],
            },
            tl="t0",
            tick=2,
        )
        await writer.aclose()  # no terminal record: the process died here

    anyio.run(crash_after_a_retrieval)
    assert read_trace(resumed).terminal is None
    anyio.run(lambda: resume_run(resumed, fsync=False))
    return whole, resumed


def test_the_resumed_trace_is_the_uninterrupted_run(runs: tuple[Path, Path]) -> None:
    whole, resumed = runs
    assert verify_trace(resumed).exit_code == 0
    assert canonical_hash(read_trace(resumed)) == canonical_hash(read_trace(whole))


def test_score_reads_the_effective_history(runs: tuple[Path, Path]) -> None:
    whole, resumed = runs
    a, b = rows_from_trace(whole), rows_from_trace(resumed)
    assert a is not None and b is not None
    assert (b.p_yes, b.unresolved_mass, b.run_id) == (a.p_yes, a.unresolved_mass, a.run_id)


def test_hindsight_never_counts_the_voided_access(runs: tuple[Path, Path]) -> None:
    whole, resumed = runs
    graph = load_hindsight(GRAPH)
    effective = source_precision(trace_records(resumed), graph)
    assert effective == source_precision(trace_records(whole), graph)
    assert UNCITED not in effective.accessed
    # counted naively, the crashed tick's access would change the score
    naive = source_precision(_naive_records(resumed), graph)
    assert UNCITED in naive.accessed and naive.precision != effective.precision
    # the same simulated events (the re-run tick is written later in the file, so in another order)
    events = {e.id: e for e in extract_forecast(trace_records(resumed)).events}
    assert events == {e.id: e for e in extract_forecast(trace_records(whole)).events}


def test_score_command_counts_sources_from_the_effective_history(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """``worldsim score --hindsight``: the resumed trace's source precision is the uninterrupted
    run's, not what the voided tick's access would make it."""
    whole, resumed = runs

    def per_card(trace: Path) -> dict[str, Any]:
        report = tmp_path / f"{trace.parent.name}.json"
        args = ["score", str(trace), "--labels", str(LABELS), "--hindsight", str(GRAPH.parent)]
        result = CliRunner().invoke(app, [*args, "--json", str(report)])
        assert result.exit_code == 0, result.output
        rows: list[dict[str, Any]] = json.loads(report.read_text())["per_card"]
        assert len(rows) == 1
        return rows[0]

    a, b = per_card(whole), per_card(resumed)
    assert (b["srcp"], b["ker"], b["brier"]) == (a["srcp"], a["ker"], a["brier"])
    naive = source_precision(_naive_records(resumed), load_hindsight(GRAPH)).precision
    assert b["srcp"] != naive


def test_the_streamed_view_leaves_out_the_voided_tick(runs: tuple[Path, Path]) -> None:
    _, resumed = runs
    lines = read_trace(resumed).lines
    marker = next(line.number for line in lines if line.type == "run_resumed")
    voided = [
        line
        for line in lines[:marker]
        if (line.tl, line.tick) == ("t0", 2) and line.type in {"proposals", "retrievals"}
    ]
    assert {line.type for line in voided} == {"proposals", "retrievals"}
    streamed = {line.number for line in iter_effective(resumed)}
    assert streamed.isdisjoint(line.number for line in voided)
    assert marker in streamed and len(streamed) < len(lines)
