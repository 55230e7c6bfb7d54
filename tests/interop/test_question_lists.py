"""`cards import` of a plain question list (CSV, JSONL) checks its columns as `score` checks a
prediction table's: a missing or misspelt column, or no question at all, is refused with one
line naming the file and the column, and nothing is written."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import invoke
from worldsim.interop.questions import PLAIN_OPTIONAL, PLAIN_REQUIRED

ROW = {
    "id": "q1",
    "question": "Will the dam open?",
    "as_of": "2027-01-01",
    "deadline": "2027-06-01",
    "background": "It was built in 2020.",
    "outcomes": "",
}


def _refusal(source: Path, out: Path) -> str:
    """``cards import SOURCE -o OUT`` refused (exit 2, nothing written): its one line."""
    done = invoke("cards", "import", source, "-o", out)
    assert done.code == 2, (done.out, done.err)
    assert "Traceback" not in done.err and not out.exists()
    return done.err.strip()


def test_a_csv_with_a_misspelt_required_column_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "q.csv"
    source.write_text("question,asof,deadline\nWill it?,2027-01-01,2027-02-01\n", encoding="utf-8")
    said = _refusal(source, tmp_path / "cards")
    assert said == f"error: {source}:1: field 'as_of': missing column"


def test_a_csv_with_a_misspelt_optional_column_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "q.csv"
    source.write_text(
        "question,as_of,deadline,backround\nWill it?,2027-01-01,2027-02-01,Dry.\n",
        encoding="utf-8",
    )
    known = ", ".join(PLAIN_REQUIRED + PLAIN_OPTIONAL)
    said = _refusal(source, tmp_path / "cards")
    assert (
        said
        == f"error: {source}:1: field 'backround': unknown column (a question list has {known})"
    )


def test_an_empty_csv_or_one_without_rows_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    said = _refusal(empty, tmp_path / "cards")
    assert said == f"error: {empty}:1: field 'question': missing column"
    header = tmp_path / "header.csv"
    header.write_text("question,as_of,deadline\n", encoding="utf-8")
    said = _refusal(header, tmp_path / "cards")
    assert said == f"error: {header}: question list holds no questions"


def test_a_jsonl_row_without_a_required_key_or_with_an_unknown_one_is_refused(
    tmp_path: Path,
) -> None:
    source = tmp_path / "q.jsonl"
    lacking = {k: v for k, v in ROW.items() if k != "deadline"}
    source.write_text(json.dumps(ROW) + "\n" + json.dumps(lacking) + "\n", encoding="utf-8")
    said = _refusal(source, tmp_path / "cards")
    assert said == f"error: {source}:2: field 'deadline': missing column"
    source.write_text(json.dumps({**ROW, "asof": "2027-01-01"}) + "\n", encoding="utf-8")
    known = ", ".join(PLAIN_REQUIRED + PLAIN_OPTIONAL)
    said = _refusal(source, tmp_path / "cards")
    assert said == f"error: {source}:1: field 'asof': unknown column (a question list has {known})"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    said = _refusal(empty, tmp_path / "cards")
    assert said == f"error: {empty}: question list holds no questions"


COLUMNS = [*PLAIN_REQUIRED, *PLAIN_OPTIONAL, "asof", "questions", "notes"]


@settings(max_examples=25, deadline=None)
@given(header=st.lists(st.sampled_from(COLUMNS), max_size=7, unique=True))
def test_a_csv_imports_exactly_when_it_has_every_required_column_and_no_other(
    header: list[str],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        source = root / "q.csv"
        cells = [ROW.get(column, "x") for column in header]
        source.write_text(",".join(header) + "\n" + ",".join(cells) + "\n", encoding="utf-8")
        done = invoke("cards", "import", source, "-o", root / "cards")
        if set(PLAIN_REQUIRED) <= set(header) <= set(PLAIN_REQUIRED + PLAIN_OPTIONAL):
            assert done.code == 0, done.err
            assert len(list((root / "cards").glob("*.yaml"))) == 1
        else:
            assert done.code == 2 and "column" in done.err and str(source) in done.err
            assert not (root / "cards").exists()


def test_a_list_whose_every_question_is_rejected_is_refused_with_the_reasons(
    tmp_path: Path,
) -> None:
    source = tmp_path / "q.csv"
    source.write_text(
        "question,as_of,deadline\n"
        "Will it?,someday,2027-02-01\n"
        "Will it not?,2027-03-01,2027-02-01\n",
        encoding="utf-8",
    )
    said = _refusal(source, tmp_path / "cards")
    assert said == (
        f"error: {source}: none of its 2 question(s) makes a card: "
        "1 field 'as_of': not an ISO date or datetime: 'someday'; "
        "1 field 'deadline': must be after as_of"
    )
    # one good row among them: the others are rejected, the good one imported, exit 0
    source.write_text(
        source.read_text(encoding="utf-8") + "Will it rain?,2027-01-01,2027-02-01\n",
        encoding="utf-8",
    )
    done = invoke("cards", "import", source, "-o", tmp_path / "cards")
    assert done.code == 0, done.err
    assert len(list((tmp_path / "cards").glob("*.yaml"))) == 1
    assert "2 rejected" in done.out


def test_a_csv_naming_a_column_twice_is_refused_naming_it(tmp_path: Path) -> None:
    """The csv reader would keep the second column's cells only: a question silently replaced."""
    source = tmp_path / "q.csv"
    source.write_text(
        "question,as_of,deadline,question\nWill X?,2027-01-01,2027-02-01,Y\n", encoding="utf-8"
    )
    said = _refusal(source, tmp_path / "cards")
    assert said == f"error: {source}:1: field 'question': column given twice in the header"


def test_a_jsonl_value_that_is_not_text_rejects_its_row_naming_the_field_and_type(
    tmp_path: Path,
) -> None:
    source = tmp_path / "q.jsonl"
    rows = [
        {**ROW, "id": "a", "background": {"a": 1}},  # was imported with no context
        {**ROW, "id": "b", "as_of": 20270101},  # was rejected as "missing"
        {**ROW, "id": 7},  # a whole-number id is text enough
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "cards"
    done = invoke("cards", "import", source, "-o", out)
    assert done.code == 0, done.err
    assert sorted(p.name for p in out.glob("*.yaml")) == ["7.yaml"]
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert rejects == [
        {"where": "line 1", "reason": "field 'background': dict is not text"},
        {"where": "line 2", "reason": "field 'as_of': int is not text"},
    ]
