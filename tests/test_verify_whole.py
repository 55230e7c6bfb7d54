"""A trace read whole (as the viewer holds it) verifies as its stream does: the same checks,
the same verdict and hash, at the collector's pace; it is replayed at that pace too."""

from __future__ import annotations

from pathlib import Path

import pytest

import worldsim.trace.verify as verify_module
from tests.support import collector_paces, forge
from worldsim.domain.errors import TraceError
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace


def test_a_trace_read_whole_verifies_as_its_stream(branching_demo_trace: Path) -> None:
    streamed = verify_trace(branching_demo_trace, canonical=True)
    whole = verify_trace(read_trace(branching_demo_trace), canonical=True)
    assert whole.exit_code == streamed.exit_code == 0
    assert whole.canonical == streamed.canonical is not None
    assert (whole.head, whole.records, whole.terminal) == (
        streamed.head,
        streamed.records,
        streamed.terminal,
    )
    assert whole.recomputed == streamed.recomputed and whole.matches


@pytest.mark.parametrize("whole", [False, True], ids=["streamed", "read whole"])
def test_a_line_out_of_the_writers_form_is_refused(
    branching_demo_trace: Path, tmp_path: Path, whole: bool
) -> None:
    """The same JSON spelled with spaces, chained and sealed as the writer would: the chain
    holds, the form check does not, read either way."""
    respelled = tmp_path / "respelled.jsonl"
    forge(branching_demo_trace, respelled, lambda records: None, respell=5)
    source = read_trace(respelled) if whole else respelled
    with pytest.raises(TraceError, match="not in the writer's canonical form") as caught:
        verify_trace(source)
    assert caught.value.line == 6  # lines are numbered from 1


def test_a_replay_leaves_the_collectors_pace_to_the_program(
    branching_demo_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The multiverse is rebuilt, and p_yes extracted again from its leaves, at the pace the
    program set (the threshold is read as the extraction runs, the last step of a replay)."""
    trace = read_trace(branching_demo_trace)
    with collector_paces(monkeypatch, verify_module, "extract_again") as seen:
        result = verify_module.replay(trace)
    assert result.recomputed is not None and result.recorded == result.recomputed
    assert seen == [700]


@pytest.mark.parametrize(
    ("shift", "says"),
    [("2027-02-01T00:00:00Z", "is dated 2027-02-01T00:00:00Z, not"), (None, "outside the run's")],
    ids=["another date", "another tick"],
)
def test_a_tick_off_the_runs_calendar_is_refused(
    branching_demo_trace: Path, tmp_path: Path, shift: str | None, says: str
) -> None:
    """A tick's date follows from the card and the run's ticks: a re-chained trace that moves
    one (or numbers a tick past the last) was verified."""

    def edit(records: list[dict[str, object]]) -> None:
        first = next(r for r in records if r["type"] == "tick_started")
        if shift is not None:
            first["data"]["date"] = shift  # type: ignore[index]
        else:
            ticks = next(r for r in records if r["type"] == "run_started")["data"]["ticks"]  # type: ignore[index]
            for r in records:
                if r.get("tl") == first["tl"] and r.get("tick") == first["tick"]:
                    r["tick"] = ticks

    forged = tmp_path / "forged.jsonl"
    forge(branching_demo_trace, forged, edit)
    with pytest.raises(TraceError, match=says):
        verify_trace(forged)
