"""Blends, the uniform reference, multiple choice, failure tags, the contamination filter and the
per-card CSV and Markdown tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.scoring.conftest import Runner, write_csv


def _score(run: Runner, tmp_path: Path, *args: str | Path) -> dict[str, Any]:
    out = tmp_path / "s.json"
    result = run("score", *args, "--bootstrap", "300", "--json", out)
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    preds = write_csv(
        tmp_path / "p.csv",
        [
            "card_id",
            "method",
            "p_yes",
            "unresolved_mass",
            "model",
            "prompt_version",
            "response_id",
            "extraction_rule",
            "p_yes_raw",
        ],
        [
            # A: baseline confident and right (0.95, yes); method pulled to 0.6 → dilution.
            ("A", "direct", "0.95", "", "openai/gpt-x", "abc123abc123", "resp-1", "direct/1", ""),
            ("A", "branching", "0.6", "0.4", "offline", "", "", "path-ledger/1", "0.62"),
            # B: both on the wrong side.
            ("B", "direct", "0.7", "", "openai/gpt-x", "abc123abc123", "resp-2", "direct/1", ""),
            ("B", "branching", "0.8", "0.1", "offline", "", "", "path-ledger/1", "0.8"),
            # C: almost the same loss → near tie at the smallest positive threshold 0.0001.
            ("C", "direct", "0.3", "", "openai/gpt-x", "abc123abc123", "resp-3", "direct/1", ""),
            ("C", "branching", "0.30001", "0.0", "offline", "", "", "path-ledger/1", ""),
        ],
    )
    labels = write_csv(
        tmp_path / "l.csv", ["card_id", "outcome"], [("A", "yes"), ("B", "no"), ("C", "no")]
    )
    return preds, labels


def test_blend_and_uniform_are_scored_as_methods(
    run: Runner, tmp_path: Path, pair: tuple[Path, Path]
) -> None:
    preds, labels = pair
    doc = _score(
        run,
        tmp_path,
        preds,
        "--labels",
        labels,
        "--blend",
        "Blend=direct:0.25,branching:0.75",
        "--uniform",
        "--compare",
        "uniform:Blend",
    )
    rows = {(r["method"], r["card_id"]): r for r in doc["per_card"]}
    assert rows[("Blend", "A")]["p_yes"] == pytest.approx(0.25 * 0.95 + 0.75 * 0.6)
    assert rows[("uniform", "B")]["p_yes"] == 0.5
    assert doc["methods"]["uniform"]["brier"] == 0.25
    blend_brier = [
        (0.25 * 0.95 + 0.75 * 0.6 - 1) ** 2,
        (0.25 * 0.7 + 0.75 * 0.8) ** 2,
        (0.25 * 0.3 + 0.75 * 0.30001) ** 2,
    ]
    assert doc["methods"]["Blend"]["brier"] == pytest.approx(sum(blend_brier) / 3)
    assert doc["blends"] == {"Blend": {"direct": 0.25, "branching": 0.75}}
    assert doc["comparisons"][0]["mean_delta_brier"] == pytest.approx(0.25 - sum(blend_brier) / 3)


def test_failure_tags(run: Runner, tmp_path: Path, pair: tuple[Path, Path]) -> None:
    preds, labels = pair
    doc = _score(run, tmp_path, preds, "--labels", labels, "--compare", "direct:branching")
    tags = {r["card_id"]: r["tags"] for r in doc["per_card"] if r["method"] == "branching"}
    assert tags == {
        "A": ["branch-dilution vs direct"],
        "B": ["both-wrong vs direct"],
        "C": ["near-tie vs direct"],
    }
    assert all(r["tags"] == [] for r in doc["per_card"] if r["method"] == "direct")


def test_per_card_csv_and_markdown(run: Runner, tmp_path: Path, pair: tuple[Path, Path]) -> None:
    preds, labels = pair
    csv_path, md_path = tmp_path / "t" / "cards.csv", tmp_path / "t" / "cards.md"
    result = run(
        "score",
        preds,
        "--labels",
        labels,
        "--compare",
        "direct:branching",
        "--bootstrap",
        "200",
        "--csv",
        csv_path,
        "--markdown",
        md_path,
    )
    assert result.code == 0, result.err
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6
    first = rows[0]
    assert list(first) == [
        "card_id",
        "unit",
        "forecast_date",
        "method",
        "verified",
        "model",
        "prompt_version",
        "response_id",
        "extraction_rule",
        "n_replicates",
        "p_yes_raw",
        "p_yes",
        "p_options",
        "unresolved_mass",
        "outcome",
        "brier",
        "log",
        "correct",
        "tags",
    ]
    a_branch = next(r for r in rows if (r["card_id"], r["method"]) == ("A", "branching"))
    assert a_branch["p_yes_raw"] == "0.62" and a_branch["p_yes"] == "0.6"
    assert a_branch["unresolved_mass"] == "0.4" and a_branch["outcome"] == "yes"
    assert float(a_branch["brier"]) == pytest.approx(0.16)
    assert a_branch["tags"] == "branch-dilution vs direct"
    a_direct = next(r for r in rows if (r["card_id"], r["method"]) == ("A", "direct"))
    assert (a_direct["model"], a_direct["response_id"]) == ("openai/gpt-x", "resp-1")
    assert {r["verified"] for r in rows} == {"false"}  # read from a table: nothing checks it
    md = md_path.read_text().splitlines()
    assert md[0].startswith("| card_id | unit | forecast_date | method | verified | model |")
    assert len(md) == 2 + 6


def test_multiple_choice_table_with_option_columns(run: Runner, tmp_path: Path) -> None:
    preds = write_csv(
        tmp_path / "mc.csv",
        ["card_id", "method", "p_red", "p_green", "p_blue"],
        [
            ("M1", "a", "0.7", "0.2", "0.1"),
            ("M2", "a", "0.2", "0.2", "0.6"),
            ("M1", "b", "0.4", "0.4", "0.2"),
            ("M2", "b", "0.1", "0.1", "0.8"),
        ],
    )
    labels = write_csv(tmp_path / "l.csv", ["card_id", "outcome"], [("M1", "red"), ("M2", "green")])
    doc = _score(
        run,
        tmp_path,
        preds,
        "--labels",
        labels,
        "--uniform",
        "--compare",
        "a:b",
        "--blend",
        "Mix=a:0.5,b:0.5",
    )
    # a: M1 (0.3² + 0.2² + 0.1²) = 0.14, M2 (0.2² + 0.8² + 0.6²) = 1.04 → 0.59
    assert doc["methods"]["a"]["brier"] == pytest.approx(0.59)
    # log: (−ln 0.7 − ln 0.2)/2
    assert doc["methods"]["a"]["log"] == pytest.approx((0.35667494 + 1.60943791) / 2)
    assert doc["methods"]["a"]["accuracy"] == 0.5
    # uniform: 1/3 each; Brier (2/3)² + 2·(1/3)² = 2/3 on every card
    assert doc["methods"]["uniform"]["brier"] == pytest.approx(2 / 3)
    mix = next(r for r in doc["per_card"] if (r["method"], r["card_id"]) == ("Mix", "M1"))
    assert mix["p_options"] == pytest.approx({"blue": 0.15, "green": 0.3, "red": 0.55})
    assert doc["methods"]["a"]["ece"] is None  # no binary cards to calibrate
    # b: M1 (0.6² + 0.4² + 0.2²) = 0.56, M2 (0.1² + 0.9² + 0.8²) = 1.46
    assert doc["comparisons"][0]["mean_delta_brier"] == pytest.approx(0.59 - (0.56 + 1.46) / 2)


def test_contamination_filter_reports_filtered_and_unfiltered(run: Runner, tmp_path: Path) -> None:
    preds = write_csv(
        tmp_path / "p.csv",
        ["card_id", "method", "p_yes", "model", "as_of"],
        [
            ("old", "llm", "0.9", "vendor/model-2025", "2024-06-01"),
            ("old", "sim", "0.6", "offline", "2024-06-01"),
            ("new", "llm", "0.2", "vendor/model-2025", "2025-09-01"),
            ("new", "sim", "0.4", "offline", "2025-09-01"),
        ],
    )
    cutoffs = tmp_path / "cutoffs.yaml"
    cutoffs.write_text("vendor/model-2025: '2025-03-31'\n")
    labels = write_csv(tmp_path / "l.csv", ["card_id", "outcome"], [("old", "yes"), ("new", "no")])
    doc = _score(
        run, tmp_path, preds, "--labels", labels, "--cutoffs", cutoffs, "--compare", "sim:llm"
    )
    assert doc["methods"]["llm"]["n"] == 2
    c = doc["contamination"]
    assert c["excluded"] == [
        {
            "card_id": "old",
            "method": "llm",
            "model": "vendor/model-2025",
            "as_of": "2024-06-01T00:00:00+00:00",
            "cutoff": "2025-03-31T00:00:00+00:00",
        }
    ]
    assert c["methods"]["llm"]["n"] == 1
    assert c["methods"]["llm"]["brier"] == pytest.approx(0.04)
    assert c["methods"]["sim"]["n"] == 2
    assert c["comparisons"][0]["n"] == 1
    assert "contamination_filtered:*" in doc["exploratory"]


def test_contamination_filter_takes_as_of_from_a_cards_folder(run: Runner, tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "old.yaml").write_text(
        "id: old\nquestion: Will it?\nas_of: '2024-06-01'\ndeadline: '2024-12-01'\n"
        "endpoints:\n  - {id: y, title: 'Yes', polarity: 'yes'}\n"
        "  - {id: n, title: 'No', polarity: 'no'}\n"
    )
    preds = write_csv(
        tmp_path / "p.csv", ["card_id", "method", "p_yes", "model"], [("old", "llm", "0.9", "m1")]
    )
    cutoffs = write_csv(tmp_path / "cutoffs.csv", ["model", "cutoff"], [("m1", "2025-01-01")])
    labels = write_csv(tmp_path / "l.csv", ["card_id", "outcome"], [("old", "yes")])
    doc = _score(run, tmp_path, preds, "--labels", labels, "--cutoffs", cutoffs, "--cards", cards)
    assert [e["card_id"] for e in doc["contamination"]["excluded"]] == ["old"]
    assert doc["contamination"]["methods"] == {}
    result = run("score", preds, "--labels", labels, "--cutoffs", cutoffs)
    assert result.code == 2 and "as_of" in result.err and "p.csv" in result.err


@pytest.mark.parametrize("second", ["--csv", "--markdown"])
def test_two_reports_naming_one_file_are_refused_before_anything_is_written(
    run: Runner, tmp_path: Path, pair: tuple[Path, Path], second: str
) -> None:
    preds, labels = pair
    report = tmp_path / "out" / "a.json"
    result = run("score", preds, "--labels", labels, "--json", report, second, report)
    assert result.code == 2
    assert f"--json and {second} name the same file" in result.err
    assert not report.parent.exists()
