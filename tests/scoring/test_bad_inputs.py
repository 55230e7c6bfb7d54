"""Every kind of bad input gets one line naming the file and field (or line), exit 2, no output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scoring.conftest import Runner, write_csv

HEADER = ["card_id", "method", "p_yes", "run_id"]
GOOD_ROWS = [("A", "m", "0.6", "r1"), ("B", "m", "0.3", "r2")]


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "labels.csv", ["card_id", "outcome"], [("A", "yes"), ("B", "no")])


def _preds(tmp_path: Path, rows: list[tuple[str, ...]], header: list[str] = HEADER) -> Path:
    return write_csv(tmp_path / "preds.csv", header, rows)


def _fails(run: Runner, tmp_path: Path, *args: str | Path) -> str:
    out, csv_out = tmp_path / "out" / "s.json", tmp_path / "out" / "s.csv"
    result = run("score", *args, "--json", out, "--csv", csv_out)
    assert result.code == 2, result
    assert len(result.err.strip().splitlines()) == 1
    assert "Traceback" not in result.err
    assert not out.exists() and not csv_out.exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    return result.err


def test_predicted_card_without_label_is_an_error(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    preds = _preds(tmp_path, [*GOOD_ROWS, ("Z", "m", "0.5", "r3")])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:4" in err and "field 'card_id'" in err and "no label" in err and "'Z'" in err


def test_unlabelled_cards_can_be_reported_as_coverage_instead(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    preds = _preds(tmp_path, [*GOOD_ROWS, ("Z", "m", "0.5", "r3")])
    out = tmp_path / "s.json"
    result = run("score", preds, "--labels", labels, "--allow-unlabelled", "--json", out)
    assert result.code == 0, result.err
    cov = json.loads(out.read_text())["coverage"]
    assert (cov["n_predictions"], cov["n_matched"]) == (3, 2)
    assert cov["unmatched_card_ids"] == ["Z"]
    assert "n_predictions=3 n_matched=2" in result.out and "unmatched=Z" in result.out


def test_labels_without_predictions_are_listed_in_coverage(run: Runner, tmp_path: Path) -> None:
    labels = write_csv(
        tmp_path / "l.csv", ["card_id", "outcome"], [("A", "yes"), ("B", "no"), ("C", "no")]
    )
    out = tmp_path / "s.json"
    result = run("score", _preds(tmp_path, GOOD_ROWS), "--labels", labels, "--json", out)
    assert result.code == 0
    assert json.loads(out.read_text())["coverage"]["labels_without_predictions"] == ["C"]
    assert "labels_without_predictions=1" in result.out


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1.2", "outside [0, 1]"),
        ("-0.1", "outside [0, 1]"),
        ("abc", "not a number"),
        ("nan", "outside [0, 1]"),
    ],
)
def test_probability_outside_unit_interval_or_not_a_number(
    run: Runner, tmp_path: Path, labels: Path, value: str, message: str
) -> None:
    preds = _preds(tmp_path, [GOOD_ROWS[0], ("B", "m", value, "r2")])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:3" in err and "field 'p_yes'" in err and message in err


def test_duplicate_rows_same_card_method_and_run_id(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    preds = _preds(tmp_path, [*GOOD_ROWS, ("A", "m", "0.7", "r1")])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:4" in err and "duplicate prediction" in err and f"{preds}:2" in err


def test_duplicate_rows_without_run_ids(run: Runner, tmp_path: Path, labels: Path) -> None:
    preds = _preds(tmp_path, [("A", "m", "0.6"), ("A", "m", "0.6")], HEADER[:3])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:3" in err and "duplicate" in err


@pytest.mark.parametrize("outcome", ["maybe", "2", "yes please"])
def test_unparseable_binary_outcome(run: Runner, tmp_path: Path, outcome: str) -> None:
    labels = write_csv(tmp_path / "l.csv", ["card_id", "outcome"], [("A", "yes"), ("B", outcome)])
    err = _fails(run, tmp_path, _preds(tmp_path, GOOD_ROWS), "--labels", labels)
    assert f"{labels}:3" in err and "field 'outcome'" in err and outcome in err


def test_empty_outcome(run: Runner, tmp_path: Path) -> None:
    labels = tmp_path / "l.jsonl"
    labels.write_text('{"card_id": "A", "outcome": "yes"}\n{"card_id": "B", "outcome": " "}\n')
    err = _fails(run, tmp_path, _preds(tmp_path, GOOD_ROWS), "--labels", labels)
    assert f"{labels}:2" in err and "outcome" in err


@pytest.mark.parametrize("twice", ["card_id", "p_yes"])
def test_a_prediction_column_named_twice(
    run: Runner, tmp_path: Path, labels: Path, twice: str
) -> None:
    """The csv reader keeps the last of two such columns: the first's values went unscored."""
    rows = [(*row, row[HEADER.index(twice)]) for row in GOOD_ROWS]
    preds = _preds(tmp_path, rows, [*HEADER, twice])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:1" in err and f"field '{twice}'" in err and "given twice" in err


@pytest.mark.parametrize("missing", ["card_id", "method", "p_yes"])
def test_missing_prediction_column(run: Runner, tmp_path: Path, labels: Path, missing: str) -> None:
    header = [h for h in HEADER if h != missing]
    rows = [tuple(v for h, v in zip(HEADER, row, strict=True) if h != missing) for row in GOOD_ROWS]
    preds = _preds(tmp_path, rows, header)
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:1" in err and f"field '{missing}'" in err and "missing column" in err


def test_missing_label_column(run: Runner, tmp_path: Path) -> None:
    labels = write_csv(tmp_path / "l.csv", ["card_id", "result"], [("A", "yes")])
    err = _fails(run, tmp_path, _preds(tmp_path, GOOD_ROWS), "--labels", labels)
    assert f"{labels}:1" in err and "field 'outcome'" in err


def test_missing_cell_value(run: Runner, tmp_path: Path, labels: Path) -> None:
    preds = _preds(tmp_path, [GOOD_ROWS[0], ("B", "", "0.3", "r2")])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:3" in err and "field 'method'" in err


def test_malformed_csv_row_with_extra_cells(run: Runner, tmp_path: Path, labels: Path) -> None:
    preds = tmp_path / "preds.csv"
    preds.write_text("card_id,method,p_yes\nA,m,0.6\nB,m,0.3,oops\n")
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:3" in err and "more cells" in err


def test_malformed_jsonl_table(run: Runner, tmp_path: Path, labels: Path) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"card_id": "A", "method": "m", "p_yes": 0.6}\n{"card_id": "B", "method"\n')
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:2" in err and "malformed JSON" in err


def test_a_line_cut_inside_a_string_says_where_the_string_starts(
    run: Runner, tmp_path: Path, labels: Path
) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"card_id": "A", "method": "m", "p_yes": 0.6}\n{"card_id": "B\n')
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:2" in err
    assert err.strip().endswith("malformed JSON: Unterminated string starting at column 13")


def test_malformed_labels_yaml(run: Runner, tmp_path: Path) -> None:
    labels = tmp_path / "l.yaml"
    labels.write_text("- card_id: A\n  outcome: yes\n- card_id: [B\n")
    err = _fails(run, tmp_path, _preds(tmp_path, GOOD_ROWS), "--labels", labels)
    assert str(labels) in err and "malformed YAML" in err


def test_duplicate_label(run: Runner, tmp_path: Path) -> None:
    labels = write_csv(
        tmp_path / "l.csv", ["card_id", "outcome"], [("A", "yes"), ("B", "no"), ("A", "no")]
    )
    err = _fails(run, tmp_path, _preds(tmp_path, GOOD_ROWS), "--labels", labels)
    assert f"{labels}:4" in err and "duplicate label" in err


def test_missing_and_unsupported_inputs(run: Runner, tmp_path: Path, labels: Path) -> None:
    err = _fails(run, tmp_path, tmp_path / "nope.csv", "--labels", labels)
    assert "nope.csv" in err and "not found" in err
    odd = tmp_path / "preds.txt"
    odd.write_text("x")
    err = _fails(run, tmp_path, odd, "--labels", labels)
    assert "preds.txt" in err
    err = _fails(run, tmp_path, _preds(tmp_path, GOOD_ROWS), "--labels", tmp_path / "none.csv")
    assert "none.csv" in err and "not found" in err


def test_option_probabilities_must_sum_to_one(run: Runner, tmp_path: Path) -> None:
    preds = write_csv(
        tmp_path / "mc.csv", ["card_id", "method", "p_red", "p_blue"], [("A", "m", "0.5", "0.6")]
    )
    labels = write_csv(tmp_path / "l.csv", ["card_id", "outcome"], [("A", "red")])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:2" in err and "sum to 1.1" in err


def test_multiple_choice_outcome_must_be_an_option(run: Runner, tmp_path: Path) -> None:
    preds = write_csv(
        tmp_path / "mc.csv", ["card_id", "method", "p_red", "p_blue"], [("A", "m", "0.4", "0.6")]
    )
    labels = write_csv(tmp_path / "l.csv", ["card_id", "outcome"], [("A", "green")])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{labels}:2" in err and "field 'outcome'" in err and "green" in err


def test_card_predicted_as_binary_and_multiple_choice(run: Runner, tmp_path: Path) -> None:
    preds = write_csv(
        tmp_path / "mix.csv",
        ["card_id", "method", "p_yes", "p_red", "p_blue"],
        [("A", "m", "0.4", "", ""), ("A", "k", "", "0.4", "0.6")],
    )
    labels = write_csv(tmp_path / "l.csv", ["card_id", "outcome"], [("A", "yes")])
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:3" in err and "binary" in err


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (["--blend", "B=m:0.7,k:0.5"], "weights sum to 1.2, not 1"),
        (["--blend", "B=m:1.5,k:-0.5"], "must be positive"),
        (["--blend", "B=m:0.5,zz:0.5"], "unknown method 'zz'"),
        (["--blend", "B=m"], "not METHOD:W"),
        (["--compare", "m:zz"], "unknown method 'zz'"),
        (["--compare", "m"], "not BASELINE:METHOD"),
        (["--tie-eps", "0,x"], "not comma-separated numbers"),
        (["--tie-eps", "-0.1"], "non-negative"),
        (["--level", "1.5"], "between 0 and 1"),
    ],
)
def test_bad_flags(
    run: Runner, tmp_path: Path, labels: Path, flag: list[str], message: str
) -> None:
    preds = write_csv(
        tmp_path / "p.csv",
        ["card_id", "method", "p_yes"],
        [("A", "m", "0.6"), ("A", "k", "0.4"), ("B", "m", "0.1"), ("B", "k", "0.2")],
    )
    err = _fails(run, tmp_path, preds, "--labels", labels, *flag)
    assert message in err and "field '--" in err


def test_malformed_csv_quoting(run: Runner, tmp_path: Path, labels: Path) -> None:
    preds = tmp_path / "preds.csv"
    preds.write_text('card_id,method,p_yes\nA,m,0.6\nB,"m"x,0.3\n')
    err = _fails(run, tmp_path, preds, "--labels", labels)
    assert f"{preds}:3" in err and "malformed CSV" in err


def test_bad_cutoff_date(run: Runner, tmp_path: Path, labels: Path) -> None:
    preds = _preds(tmp_path, GOOD_ROWS)
    cutoffs = write_csv(tmp_path / "c.csv", ["model", "cutoff"], [("m1", "soon")])
    err = _fails(run, tmp_path, preds, "--labels", labels, "--cutoffs", cutoffs)
    assert f"{cutoffs}:2" in err and "field 'cutoff'" in err
