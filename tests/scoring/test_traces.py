"""Scoring folders of trace files: replicates averaged and counted, incomplete traces reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.scoring.conftest import Runner, write_csv, write_trace
from worldsim.scoring.inputs import rows_from_trace
from worldsim.trace.reader import read_trace


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    d = tmp_path / "traces"
    (d / "branching").mkdir(parents=True)
    (d / "direct").mkdir()
    # Card A: two branching replicates (0.8 and 0.6 → 0.7), one direct run.
    write_trace(
        d / "branching" / "a_s1.jsonl",
        card_id="A",
        method="branching",
        run_id="r1",
        p_yes=0.8,
        unresolved_mass=0.1,
    )
    write_trace(
        d / "branching" / "a_s2.jsonl",
        card_id="A",
        method="branching",
        run_id="r2",
        p_yes=0.6,
        unresolved_mass=0.3,
        torn_tail=True,
    )
    write_trace(
        d / "direct" / "a.jsonl",
        card_id="A",
        method="direct",
        run_id="r3",
        p_yes=0.4,
        routes={"direct": "openai/gpt-x"},
    )
    # Card B: one run each; a third branching run crashed before completing.
    write_trace(
        d / "branching" / "b_s1.jsonl",
        card_id="B",
        method="branching",
        run_id="r4",
        p_yes=0.2,
        unresolved_mass=0.0,
    )
    write_trace(
        d / "branching" / "b_s2.jsonl",
        card_id="B",
        method="branching",
        run_id="r5",
        p_yes=0.9,
        completed=False,
    )
    write_trace(
        d / "direct" / "b.jsonl",
        card_id="B",
        method="direct",
        run_id="r6",
        p_yes=0.3,
        routes={"direct": "openai/gpt-x"},
    )
    # Card M: multiple choice, two branching replicates.
    write_trace(
        d / "branching" / "m_s1.jsonl",
        card_id="M",
        method="branching",
        run_id="r7",
        p_options={"red": 0.6, "green": 0.3, "blue": 0.1},
    )
    write_trace(
        d / "branching" / "m_s2.jsonl",
        card_id="M",
        method="branching",
        run_id="r8",
        p_options={"red": 0.4, "green": 0.5, "blue": 0.1},
    )
    return d


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    return write_csv(
        tmp_path / "labels.csv", ["card_id", "outcome"], [("A", "yes"), ("B", "no"), ("M", "green")]
    )


def _doc(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_folder_of_traces_averages_replicates_and_reports_counts(
    run: Runner, tmp_path: Path, trace_dir: Path, labels: Path
) -> None:
    out = tmp_path / "s.json"
    result = run("score", trace_dir, "--labels", labels, "--json", out)
    assert result.code == 0, result.err
    doc = _doc(out)
    rows = {(r["method"], r["card_id"]): r for r in doc["per_card"]}
    a = rows[("branching", "A")]
    assert a["n_replicates"] == 2
    assert a["run_ids"] == ["r1", "r2"]
    assert a["p_yes"] == pytest.approx(0.7)
    assert a["unresolved_mass"] == pytest.approx(0.2)
    assert a["brier"] == pytest.approx(0.09)
    assert a["model"] == "offline"
    assert a["prompt_version"] == "b" * 12
    assert a["extraction_rule"] == "path-ledger/1"
    assert rows[("direct", "A")]["model"] == "openai/gpt-x"
    b = rows[("branching", "B")]
    assert b["n_replicates"] == 1  # the incomplete run r5 is not counted
    assert b["p_yes"] == pytest.approx(0.2)
    m = rows[("branching", "M")]
    assert m["n_replicates"] == 2
    assert m["p_options"] == pytest.approx({"blue": 0.1, "green": 0.4, "red": 0.5})
    # multiclass Brier: (0.5−0)² + (0.4−1)² + (0.1−0)² = 0.62; log −ln 0.4
    assert m["brier"] == pytest.approx(0.62)
    assert m["log"] == pytest.approx(0.916290731874155)
    assert m["correct"] is False  # red (0.5) is the top option
    assert doc["methods"]["branching"]["n"] == 3
    assert doc["methods"]["branching"]["n_runs"] == 5
    assert doc["coverage"]["n_predictions"] == 7
    assert doc["coverage"]["n_matched"] == 7
    assert doc["coverage"]["missing_by_method"] == {"direct": ["M"]}


def test_incomplete_trace_is_skipped_with_a_warning_naming_the_file(
    run: Runner, tmp_path: Path, trace_dir: Path, labels: Path
) -> None:
    out = tmp_path / "s.json"
    result = run("score", trace_dir, "--labels", labels, "--json", out)
    assert result.code == 0
    assert "b_s2.jsonl" in result.err
    assert "incomplete" in result.err
    skipped = _doc(out)["coverage"]["skipped_traces"]
    assert len(skipped) == 1 and "b_s2.jsonl" in skipped[0]


def test_torn_last_line_is_ignored(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path / "t.jsonl", card_id="A", method="m", run_id="r", p_yes=0.25, torn_tail=True
    )
    trace = read_trace(path)
    assert trace.lines[-1].type == "run_completed" and trace.torn_line == 5
    row = rows_from_trace(path)
    assert row is not None and row.p_yes == 0.25 and row.run_id == "r"


def test_damaged_trace_line_is_an_error_naming_file_and_line(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    path = write_trace(tmp_path / "t.jsonl", card_id="A", method="m", run_id="r", p_yes=0.5)
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = "{not json\n"
    path.write_text("".join(lines))
    result = run("score", path, "--labels", labels)
    assert result.code == 2
    assert f"{path}:2" in result.err


def test_trace_probability_outside_unit_interval_is_refused(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    path = write_trace(tmp_path / "t.jsonl", card_id="A", method="m", run_id="r", p_yes=1.5)
    result = run("score", path, "--labels", labels)
    assert result.code == 2
    assert "data.p_yes" in result.err and str(path) in result.err


def test_same_run_id_twice_is_a_duplicate(run: Runner, tmp_path: Path, labels: Path) -> None:
    write_trace(tmp_path / "t1.jsonl", card_id="A", method="m", run_id="same", p_yes=0.5)
    write_trace(tmp_path / "t2.jsonl", card_id="A", method="m", run_id="same", p_yes=0.6)
    result = run("score", tmp_path / "t1.jsonl", tmp_path / "t2.jsonl", "--labels", labels)
    assert result.code == 2
    assert "duplicate" in result.err and "t2.jsonl" in result.err


def test_crash_leftovers_are_skipped_with_warnings(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    d = tmp_path / "t"
    d.mkdir()
    write_trace(d / "ok.jsonl", card_id="A", method="m", run_id="r1", p_yes=0.5)
    (d / "empty.jsonl").write_bytes(b"")
    (d / "torn.jsonl").write_text('{"v": 1, "seq": 0, "ts": "2025-01-')
    out = tmp_path / "s.json"
    result = run("score", d, "--labels", labels, "--json", out)
    assert result.code == 0, result.err
    assert "empty.jsonl" in result.err and "torn.jsonl" in result.err
    assert len(_doc(out)["coverage"]["skipped_traces"]) == 2
