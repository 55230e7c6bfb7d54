"""Scoring folders of trace files: replicates averaged and counted, incomplete traces reported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.scoring.conftest import Runner, write_csv, write_trace
from worldsim.domain.errors import TraceError
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
        p_yes=0.8,
    )
    write_trace(
        d / "branching" / "a_s2.jsonl",
        card_id="A",
        method="branching",
        p_yes=0.6,
    )
    write_trace(
        d / "direct" / "a.jsonl",
        card_id="A",
        method="direct",
        p_yes=0.4,
        route="openai/gpt-x",
    )
    # Card B: one run each; a third branching run crashed before completing.
    write_trace(
        d / "branching" / "b_s1.jsonl",
        card_id="B",
        method="branching",
        p_yes=0.2,
    )
    write_trace(
        d / "branching" / "b_s2.jsonl",
        card_id="B",
        method="branching",
        p_yes=0.9,
        completed=False,
    )
    write_trace(
        d / "direct" / "b.jsonl",
        card_id="B",
        method="direct",
        p_yes=0.3,
        route="openai/gpt-x",
    )
    # Card M: multiple choice, two branching replicates.
    write_trace(
        d / "branching" / "m_s1.jsonl",
        card_id="M",
        method="branching",
        p_options={"red": 0.6, "green": 0.3, "blue": 0.1},
    )
    write_trace(
        d / "branching" / "m_s2.jsonl",
        card_id="M",
        method="branching",
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
    run_ids = [read_trace(trace_dir / "branching" / f"a_s{i}.jsonl").run_id for i in (1, 2)]
    assert a["run_ids"] == sorted(run_ids)
    assert a["p_yes"] == pytest.approx(0.7)
    assert a["unresolved_mass"] == 0.0  # a direct forecast leaves nothing unresolved
    assert a["brier"] == pytest.approx(0.09)
    assert a["model"] == "scripted/model"
    direct_started = read_trace(trace_dir / "branching" / "a_s1.jsonl").started
    assert a["prompt_version"] == f"direct={direct_started.prompt_versions['direct']}"
    assert a["extraction_rule"] == "direct/1"
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
    assert "no result: cut off: it ends with no terminal record; skipped" in result.err
    skipped = _doc(out)["coverage"]["skipped_traces"]
    assert len(skipped) == 1 and "b_s2.jsonl" in skipped[0]


def test_a_torn_line_after_run_completed_is_refused(tmp_path: Path) -> None:
    """Nothing is written after ``run_completed``: a torn line there is damage, not a crash."""
    path = write_trace(tmp_path / "t.jsonl", card_id="A", method="m", p_yes=0.25, torn_tail=True)
    for reader in (read_trace, rows_from_trace):
        with pytest.raises(TraceError, match="follows run_completed") as refused:
            reader(path)
        assert refused.value.exit_code == 1


def test_damaged_trace_line_is_refused_as_verify_refuses_it(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    path = write_trace(tmp_path / "t.jsonl", card_id="A", method="m", p_yes=0.5)
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = "{not json\n"
    path.write_text("".join(lines))
    verified = run("verify", path)
    result = run("score", path, "--labels", labels)
    assert verified.code == result.code == 1
    assert f"{path}:2" in result.err and verified.err.split(" ", 1)[1].strip() in result.err


def test_the_same_trace_twice_is_a_duplicate(run: Runner, tmp_path: Path, labels: Path) -> None:
    write_trace(tmp_path / "t1.jsonl", card_id="A", method="m", p_yes=0.5)
    shutil.copyfile(tmp_path / "t1.jsonl", tmp_path / "t2.jsonl")
    result = run("score", tmp_path / "t1.jsonl", tmp_path / "t2.jsonl", "--labels", labels)
    assert result.code == 2
    assert "duplicate" in result.err and "t2.jsonl" in result.err


def test_crash_leftovers_are_skipped_with_warnings_and_an_empty_file_refused(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    d = tmp_path / "t"
    d.mkdir()
    write_trace(d / "ok.jsonl", card_id="A", method="m", p_yes=0.5)
    (d / "torn.jsonl").write_text('{"v": 2, "seq": 0, "ts": "2025-01-')
    out = tmp_path / "s.json"
    result = run("score", d, "--labels", labels, "--json", out)
    assert result.code == 0, result.err
    assert "torn.jsonl" in result.err
    assert len(_doc(out)["coverage"]["skipped_traces"]) == 1
    (d / "empty.jsonl").write_bytes(b"")  # not even a run id: verify refuses it, exit 1
    refused = run("score", d, "--labels", labels)
    assert refused.code == run("verify", d / "empty.jsonl").code == 1
    assert "empty.jsonl" in refused.err and "trace is empty" in refused.err
