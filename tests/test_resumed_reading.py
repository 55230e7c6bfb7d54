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

from tests.support import DEMO_CARD, ROOT
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.hindsight.evidence import source_precision
from worldsim.scoring.hindsight.forecast import TraceRecord, extract_forecast, trace_records
from worldsim.scoring.hindsight.graph import load_hindsight
from worldsim.scoring.inputs import rows_from_trace
from worldsim.sim.session import resume_run, run_card
from worldsim.trace.canonical import canonical_hash
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace
from worldsim.trace.writer import TraceWriter

GRAPH = ROOT / "scenarios" / "hindsight" / "merger-review.json"
UNCITED = "mr-f01"  # in the card's evidence, cited by no hindsight event


def _naive_records(path: Path) -> list[TraceRecord]:
    """Every line of the file, voided or not: what a reader without the effective view sees."""
    records = []
    for raw in path.read_bytes().splitlines():
        obj: dict[str, Any] = json.loads(raw)
        records.append(TraceRecord(obj["type"], obj["tl"], obj["tick"], obj["data"], obj["run"]))
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
        if line.type == "proposal" and (line.tl, line.tick) == ("t0", 2)
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
            "retrieval",
            {
                "agent": cut.fields["agent"],
                "timeline": "t0",
                "tick": 2,
                "tool": "open_document",
                "doc_id": UNCITED,
                "cutoff": trace.started.card["as_of"],
                "doc_ids": [UNCITED],
                "refused": False,
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
