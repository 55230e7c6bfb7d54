"""``score`` and ``hindsight`` refuse a trace whose chain does not check out.

Without the chain check, a one-byte edit of a recorded p_yes would change a Brier score
silently; through verify's own pass it is verify's line naming the file and the line, exit 1,
no traceback, and no report written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD, ROOT
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import TraceError, TraceIncomplete
from worldsim.domain.policy import load_policy
from worldsim.scoring.hindsight.forecast import trace_records
from worldsim.scoring.inputs import rows_from_trace
from worldsim.sim.session import run_card

LABELS = ROOT / "scenarios" / "labels"
GRAPHS = ROOT / "scenarios" / "hindsight"
WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WORLDSIM, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recorded")
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=0, ticks=4)
    return anyio.run(lambda: run_card(config, out, fsync=False)).trace


def _edit_p_yes(trace: Path, out: Path) -> tuple[Path, int, float, float]:
    """Change one digit of the extraction's p_yes: (edited copy, its line, old, new p_yes)."""
    lines = trace.read_bytes().split(b"\n")
    k = next(i for i, raw in enumerate(lines) if b'"type":"extraction"' in raw)
    at = lines[k].index(b'"p_yes":0.') + len(b'"p_yes":0.')
    old_digit = lines[k][at : at + 1]
    new_digit = b"5" if old_digit != b"5" else b"4"
    edited = lines[k][:at] + new_digit + lines[k][at + 1 :]
    before = json.loads(lines[k])["data"]["p_yes"]
    after = json.loads(edited)["data"]["p_yes"]
    lines[k] = edited
    out.write_bytes(b"\n".join(lines))
    return out, k + 1, before, after


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    """A refusal as `verify` refuses: exit 1, one line, no traceback."""
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr.strip()


def test_score_refuses_a_trace_with_an_edited_p_yes(recorded: Path, tmp_path: Path) -> None:
    sound = cli("score", recorded, "--labels", LABELS, "--json", tmp_path / "sound.json")
    assert sound.returncode == 0, sound.stderr
    edited, line, before, after = _edit_p_yes(recorded, tmp_path / "edited.jsonl")
    # the edit would move the Brier score (outcome yes) if it were read
    assert (1 - after) ** 2 != pytest.approx((1 - before) ** 2)
    report = tmp_path / "edited.json"
    proc = cli("score", edited, "--labels", LABELS, "--json", report)
    message = _one_line(proc)
    assert f"{edited}:{line + 1}:" in message
    assert f"hash chain broken: prev is not the hash of line {line}" in message
    assert not report.exists()


@pytest.mark.parametrize(
    "command",
    [
        ("hindsight", "ker", "{trace}", "--hindsight", "{graph}"),
        ("hindsight", "sources", "{trace}", "--hindsight", "{graph}"),
        ("hindsight", "forecast-graph", "{trace}", "-o", "{out}"),
        ("score", "{trace}", "--labels", "{labels}", "--hindsight", "{graphs}"),
    ],
    ids=["ker", "sources", "forecast-graph", "score-axes"],
)
def test_hindsight_refuses_a_trace_with_an_edited_p_yes(
    recorded: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    edited, line, _, _ = _edit_p_yes(recorded, tmp_path / "edited.jsonl")
    out = tmp_path / "graph.json"
    values = {
        "trace": edited,
        "graph": GRAPHS / "merger-review.json",
        "graphs": GRAPHS,
        "labels": LABELS,
        "out": out,
    }
    proc = cli(*(part.format(**values) for part in command))
    assert f"{edited}:{line + 1}: hash chain broken" in _one_line(proc)
    assert not out.exists()


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_one_byte_edit_is_refused_or_reads_as_a_cut_off_run(
    recorded: Path, tmp_path: Path, data: st.DataObject
) -> None:
    """Never a different run: an edit is refused, or (the final newline) leaves a torn tail."""
    blob = recorded.read_bytes()
    pos = data.draw(st.integers(0, len(blob) - 1), label="position")
    new = data.draw(st.integers(0, 255).filter(lambda b: b != blob[pos]), label="byte")
    path = tmp_path / "edited.jsonl"
    path.write_bytes(blob[:pos] + bytes([new]) + blob[pos + 1 :])
    with pytest.raises(TraceError) as caught:
        rows_from_trace(path)
    with pytest.raises(TraceError):
        trace_records(path)
    if isinstance(caught.value, TraceIncomplete):  # sound, but cut off: the final newline
        assert pos == len(blob) - 1 and caught.value.exit_code == 3
    else:
        assert caught.value.exit_code == 1


@pytest.mark.parametrize("tail", [b" ", b"\n", b"\n\n", b'{"v":2,"se', b"x\n"])
def test_anything_after_run_completed_is_refused_by_every_reader_naming_its_line(
    recorded: Path, tmp_path: Path, tail: bytes
) -> None:
    """Nothing is written after ``run_completed``: bytes there (torn or whole, blank or not)
    are refused alike by verify, score, hindsight and replay, at the line after it."""
    from worldsim.trace.reader import read_trace
    from worldsim.trace.verify import verify_trace

    blob = recorded.read_bytes()
    last = blob.count(b"\n")
    path = tmp_path / "appended.jsonl"
    path.write_bytes(blob + tail)
    readers = (verify_trace, rows_from_trace, trace_records, read_trace)
    for reader in readers:
        with pytest.raises(TraceError) as caught:
            reader(path)
        assert caught.value.exit_code == 1 and caught.value.line == last + 1, reader
        assert "follows run_completed" in caught.value.message
    said = _one_line(cli("replay", path))
    assert said.startswith(f"error: {path}:{last + 1}: something follows run_completed")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda first: first[:50] + b"\n", "not a JSON object"),
        (lambda first: b'{"v":2,"seq":0}\n', "unknown record type None"),
    ],
    ids=["cut", "no-envelope"],
)
def test_score_refuses_a_trace_whose_first_line_is_damaged_as_verify_does(
    recorded: Path, tmp_path: Path, damage: object, said: str
) -> None:
    """A damaged first line leaves the file a damaged trace (exit 1, that line), not a
    prediction table with missing columns."""
    first, rest = recorded.read_bytes().split(b"\n", 1)
    path = tmp_path / "first.jsonl"
    path.write_bytes(damage(first) + rest)  # type: ignore[operator]
    verified = _one_line(cli("verify", path))
    scored = _one_line(cli("score", path, "--labels", LABELS))
    assert scored == f"error: {path}:1: {verified.split(':1: ', 1)[1]}"
    assert said in scored
