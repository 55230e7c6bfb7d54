"""Units of scoring: a card id forecast at two dates or from two contents is not one card."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scoring.conftest import Runner, write_csv, write_trace
from worldsim.domain.errors import CardError
from worldsim.scoring.inputs import PredictionRow
from worldsim.scoring.units import unit_suffixes

JAN = "2025-01-01T00:00:00Z"
FEB = "2025-02-01T00:00:00Z"


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "labels.csv", ["card_id", "outcome"], [["A", "yes"]])


def _two_dates(folder: Path, method: str = "m", p: tuple[float, float] = (0.8, 0.2)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_trace(
        folder / f"{method}-jan.jsonl",
        card_id="A",
        method=method,
        p_yes=p[0],
        as_of=JAN,
    )
    write_trace(
        folder / f"{method}-feb.jsonl",
        card_id="A",
        method=method,
        p_yes=p[1],
        as_of=FEB,
    )
    return folder


def test_two_forecast_dates_of_one_card_are_refused_naming_both_traces(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    traces = _two_dates(tmp_path / "traces")
    out = tmp_path / "score.json"
    result = run("score", traces, "--labels", labels, "--json", out)
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1
    assert "card 'A'" in result.err
    assert "m-jan.jsonl" in result.err and "m-feb.jsonl" in result.err
    assert "forecast dates 2025-01-01 and 2025-02-01" in result.err
    assert "--split-card-versions" in result.err
    assert not out.exists()


def test_split_flag_scores_each_forecast_date_as_its_own_unit(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    traces = _two_dates(tmp_path / "traces")
    out = tmp_path / "score.json"
    result = run("score", traces, "--labels", labels, "--split-card-versions", "--json", out)
    assert result.code == 0, result.err
    doc = json.loads(out.read_text())
    assert (doc["n_cards"], doc["n_units"]) == (1, 2)
    rows = {r["unit"]: r for r in doc["per_card"]}
    assert set(rows) == {"A@2025-01-01", "A@2025-02-01"}
    jan, feb = rows["A@2025-01-01"], rows["A@2025-02-01"]
    # never averaged as replicates: each unit keeps its own run's forecast
    assert (jan["p_yes"], jan["n_replicates"], jan["forecast_date"]) == (0.8, 1, "2025-01-01")
    assert (feb["p_yes"], feb["n_replicates"], feb["forecast_date"]) == (0.2, 1, "2025-02-01")
    assert jan["card_id"] == feb["card_id"] == "A"
    assert doc["methods"]["m"]["n"] == 2
    assert doc["methods"]["m"]["brier"] == pytest.approx((0.2**2 + 0.8**2) / 2)
    assert "units=2" in result.out


def test_split_units_pair_per_forecast_date_across_methods(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    traces = tmp_path / "traces"
    _two_dates(traces, "a", (0.9, 0.6))
    _two_dates(traces, "b", (0.7, 0.7))
    out = tmp_path / "score.json"
    result = run(
        "score",
        traces,
        "--labels",
        labels,
        "--split-card-versions",
        "--compare",
        "a:b",
        "--bootstrap",
        "50",
        "--json",
        out,
    )
    assert result.code == 0, result.err
    comp = json.loads(out.read_text())["comparisons"][0]
    assert comp["n"] == 2
    want = ((0.1**2 - 0.3**2) + (0.4**2 - 0.3**2)) / 2
    assert comp["mean_delta"] == pytest.approx(want)


def test_different_card_content_at_one_date_is_refused(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    write_trace(folder / "one.jsonl", card_id="A", method="m", p_yes=0.6)
    write_trace(
        folder / "two.jsonl",
        card_id="A",
        method="m",
        p_yes=0.4,
        question="Will A happen, revised?",
    )
    result = run("score", folder, "--labels", labels)
    assert result.code == 2
    assert "card 'A'" in result.err and "card content differs" in result.err
    assert "one.jsonl" in result.err and "two.jsonl" in result.err

    split = run(
        "score", folder, "--labels", labels, "--split-card-versions", "--json", tmp_path / "s.json"
    )
    assert split.code == 0, split.err
    rows = json.loads((tmp_path / "s.json").read_text())["per_card"]
    units = sorted(r["unit"] for r in rows)
    assert len(units) == 2 and all(u.startswith("A#") and len(u) == 2 + 12 for u in units)
    assert {r["unit"][2:] for r in rows} == {r["card_hash"][:12] for r in rows}


def test_same_card_date_and_content_are_still_pooled_as_replicates(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for i, p in enumerate((0.6, 0.8)):
        write_trace(folder / f"r{i}.jsonl", card_id="A", method="m", p_yes=p)
    out = tmp_path / "score.json"
    assert run("score", folder, "--labels", labels, "--json", out).code == 0
    (row,) = json.loads(out.read_text())["per_card"]
    assert (row["unit"], row["n_replicates"]) == ("A", 2)
    assert row["p_yes"] == pytest.approx(0.7)


def test_table_rows_with_two_as_of_dates_are_refused_naming_the_lines(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    preds = write_csv(
        tmp_path / "p.csv",
        ["card_id", "method", "p_yes", "as_of", "run_id"],
        [["A", "m", "0.6", "2025-01-01", "1"], ["A", "m", "0.4", "2025-02-01", "2"]],
    )
    result = run("score", preds, "--labels", labels)
    assert result.code == 2
    assert f"{preds}:2 and {preds}:3" in result.err
    assert "forecast dates 2025-01-01 and 2025-02-01" in result.err


def test_table_card_hash_column_follows_the_same_rule(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    header = ["card_id", "method", "p_yes", "card_hash", "run_id"]
    preds = write_csv(
        tmp_path / "p.csv", header, [["A", "m", "0.6", "aaa", "1"], ["A", "m", "0.4", "bbb", "2"]]
    )
    result = run("score", preds, "--labels", labels)
    assert result.code == 2 and "card content differs" in result.err


def test_split_row_that_does_not_say_its_date_is_an_error(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    preds = write_csv(
        tmp_path / "p.csv",
        ["card_id", "method", "p_yes", "as_of", "run_id"],
        [
            ["A", "m", "0.6", "2025-01-01", "1"],
            ["A", "m", "0.4", "2025-02-01", "2"],
            ["A", "n", "0.5", "", "3"],
        ],
    )
    result = run("score", preds, "--labels", labels, "--split-card-versions")
    assert result.code == 2
    assert f"{preds}:4" in result.err and "field 'as_of'" in result.err


def test_rows_without_a_date_join_the_only_version_of_their_card(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    trace = write_trace(tmp_path / "t.jsonl", card_id="A", method="m", p_yes=0.7)
    preds = write_csv(tmp_path / "p.csv", ["card_id", "method", "p_yes"], [["A", "n", "0.5"]])
    out = tmp_path / "s.json"
    result = run(
        "score",
        trace,
        preds,
        "--labels",
        labels,
        "--compare",
        "n:m",
        "--bootstrap",
        "20",
        "--json",
        out,
    )
    assert result.code == 0, result.err
    assert json.loads(out.read_text())["comparisons"][0]["n"] == 1


def _row(card: str, day: int | None, content: str | None, i: int) -> PredictionRow:
    return PredictionRow(
        card_id=card,
        method="m",
        kind="binary",
        p_yes=0.5,
        p_options=None,
        source=f"t{i}.jsonl",
        as_of=None if day is None else datetime(2025, 1, day, tzinfo=UTC),
        card_hash=content,
    )


versions = st.lists(
    st.tuples(st.sampled_from(["A", "B"]), st.integers(1, 3), st.sampled_from(["h1", "h2"])),
    min_size=1,
    max_size=12,
)


@settings(max_examples=100, deadline=None)
@given(versions)
def test_split_units_are_exactly_the_distinct_versions(
    found: list[tuple[str, int, str]],
) -> None:
    rows = [_row(card, day, content, i) for i, (card, day, content) in enumerate(found)]
    units = [r.card_id + s for r, s in zip(rows, unit_suffixes(rows, split=True), strict=True)]
    # same (card, date, content) ⇔ same unit
    for a, ua in zip(found, units, strict=True):
        for b, ub in zip(found, units, strict=True):
            assert (ua == ub) == (a == b)
    unsplit_ok = all(_one_version(found, card) for card, _, _ in found)
    if unsplit_ok:
        assert unit_suffixes(rows, split=False) == [""] * len(rows)
    else:
        with pytest.raises(CardError):
            unit_suffixes(rows, split=False)


def _one_version(found: list[tuple[str, int, str]], card: str) -> bool:
    return len({(d, c) for k, d, c in found if k == card}) == 1
