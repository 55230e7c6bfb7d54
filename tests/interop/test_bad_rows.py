"""A row of a real ForecastBench file with a bad field is rejected with the file's own field
named, never read as something else: a resolution row whose ``resolved`` is missing or not a
boolean is no provisional label, a bad ``resolution_date`` is named as such, and a question
whose freeze date or freeze value is missing or bad gets no card stating a false date or no
prior. Each test edits a few rows of a slice of the published files (tests/interop/data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.support import invoke

DATA = Path(__file__).parent / "data"
LLM = DATA / "2025-10-26-llm.json"
RESOLUTIONS = DATA / "2025-10-26_resolution_set.json"
MARKETS = ("infer", "manifold", "metaculus", "polymarket")


def _edited(source: Path, out: Path, key: str, edits: dict[int, dict[str, Any]]) -> Path:
    """``source`` with rows ``doc[key][i]`` updated by ``edits[i]`` (a value None deletes the
    field), written to ``out``."""
    doc = json.loads(source.read_text(encoding="utf-8"))
    for i, changes in edits.items():
        for field, value in changes.items():
            if value is None:
                del doc[key][i][field]
            else:
                doc[key][i][field] = value
    out.write_text(json.dumps(doc), encoding="utf-8")
    return out


def _rejects(folder: Path) -> dict[str, str]:
    lines = (folder / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["where"]: r["reason"] for r in map(json.loads, lines)}


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(RESOLUTIONS.read_text(encoding="utf-8"))["resolutions"]
    return rows


def _only_row(rows: list[dict[str, Any]], resolved: bool, market: bool) -> int:
    """A row of a question that has no other row in the set."""
    keys = [(r["source"], r["id"]) for r in rows]
    return next(
        i
        for i, r in enumerate(rows)
        if r["resolved"] is resolved
        and (r["source"] in MARKETS) is market
        and keys.count((r["source"], r["id"])) == 1
    )


def _card_id(row: dict[str, Any]) -> str:
    market = row["source"] in MARKETS
    return f"{row['source']}-{row['id']}" + ("" if market else f"-{row['resolution_date']}")


def test_a_row_whose_resolved_is_missing_or_not_a_boolean_is_rejected_not_provisional(
    tmp_path: Path,
) -> None:
    rows = _rows()
    open_market = _only_row(rows, resolved=False, market=True)
    closed_market = _only_row(rows, resolved=True, market=True)
    data_set = _only_row(rows, resolved=True, market=False)
    edited = _edited(
        RESOLUTIONS,
        tmp_path / RESOLUTIONS.name,
        "resolutions",
        {
            open_market: {"resolved": None},
            closed_market: {"resolved": "true"},
            data_set: {"resolved": None},
        },
    )
    labels = tmp_path / "labels"
    done = invoke("cards", "labels", edited, "-o", labels)
    assert done.code == 0, done.err
    rejects = _rejects(labels)
    assert rejects[f"resolutions.{open_market}"] == "field 'resolved': missing"
    assert rejects[f"resolutions.{closed_market}"] == "field 'resolved': not a boolean ('true')"
    assert rejects[f"resolutions.{data_set}"] == "field 'resolved': missing"
    for i in (open_market, closed_market, data_set):
        assert not (labels / f"{_card_id(rows[i])}.yaml").exists()
    untouched = _only_row(rows[open_market + 1 :], resolved=False, market=True) + open_market + 1
    label = yaml.safe_load((labels / f"{_card_id(rows[untouched])}.yaml").read_text())
    assert label["outcome"] == "provisional"


def test_a_bad_resolution_date_is_named_as_the_files_field_before_the_card_check(
    tmp_path: Path,
) -> None:
    """The row's date is checked before its card is looked for: with ``--cards`` the reason is
    still the date, not a missing card (the bad date makes a card id no card has)."""
    rows = _rows()
    data_set = _only_row(rows, resolved=True, market=False)
    market = _only_row(rows, resolved=True, market=True)
    edits = {data_set: {"resolution_date": "2025-13-45"}, market: {"resolution_date": "2025-13-45"}}
    edited = _edited(RESOLUTIONS, tmp_path / RESOLUTIONS.name, "resolutions", edits)
    cards = tmp_path / "cards"
    assert invoke("cards", "import", LLM, "-o", cards).code == 0
    for name, extra in (("alone", ()), ("with-cards", ("--cards", cards))):
        labels = tmp_path / name
        done = invoke("cards", "labels", edited, "-o", labels, *extra)
        assert done.code == 0, done.err
        rejects = _rejects(labels)
        for i in (data_set, market):
            assert rejects[f"resolutions.{i}"] == (
                "field 'resolution_date': not an ISO date: '2025-13-45'"
            )
        assert not (labels / f"{_card_id(rows[market])}.yaml").exists()


def _questions() -> list[dict[str, Any]]:
    questions: list[dict[str, Any]] = json.loads(LLM.read_text(encoding="utf-8"))["questions"]
    return questions


def _first(questions: list[dict[str, Any]], source: str, after: int = -1) -> int:
    return next(i for i, q in enumerate(questions) if q["source"] == source and i > after)


def _import(edited: Path, out: Path) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    done = invoke("cards", "import", edited, "-o", out)
    assert done.code == 0, done.err
    cards = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in out.glob("*.yaml")}
    return _rejects(out), cards


def _where(questions: list[dict[str, Any]], i: int) -> str:
    return f"questions.{i} (id {questions[i]['id']})"


def test_a_question_needing_its_freeze_date_without_a_valid_one_is_rejected(
    tmp_path: Path,
) -> None:
    """A market question with a freeze value and any data-set question need ``freeze_datetime``
    (the card states the value at that date, and no other date may stand in for it); a market
    question giving neither starts at the round's due date, stating no value."""
    questions = _questions()
    missing, bad = _first(questions, "manifold"), _first(questions, "metaculus")
    data_set = _first(questions, "fred")
    bare = _first(questions, "infer")
    edits: dict[int, dict[str, Any]] = {
        missing: {"freeze_datetime": None},
        bad: {"freeze_datetime": "2025-13-45"},
        data_set: {"freeze_datetime": "N/A"},
        bare: {"freeze_datetime": None, "freeze_datetime_value": "N/A"},
    }
    rejects, cards = _import(_edited(LLM, tmp_path / LLM.name, "questions", edits), tmp_path / "c")
    assert rejects[_where(questions, missing)] == "field 'freeze_datetime': missing"
    assert (
        rejects[_where(questions, bad)] == "field 'freeze_datetime': not an ISO date: '2025-13-45'"
    )
    assert rejects[_where(questions, data_set)] == "field 'freeze_datetime': missing"
    for i in (missing, bad, data_set):
        q = questions[i]
        assert not any(c.startswith(f"{q['source']}-{q['id']}") for c in cards)
    started = cards[f"infer-{questions[bare]['id']}"]
    assert str(started["as_of"]).startswith("2025-10-26")
    assert "Value at" not in started["context"] and "seeds" not in started
    assert len(rejects) == 3


def test_a_market_freeze_value_that_is_not_a_probability_is_rejected_not_dropped(
    tmp_path: Path,
) -> None:
    """A market's freeze value is its card's prior: one that is not a number in [0, 1] is
    refused naming ``freeze_datetime_value``; a data-set question's may be text (wikipedia's
    "No", a swimming event) and still makes its cards."""
    questions = _questions()
    text, beyond = _first(questions, "polymarket"), _first(questions, "manifold")
    worded = _first(questions, "wikipedia")
    edits: dict[int, dict[str, Any]] = {
        text: {"freeze_datetime_value": "about a third"},
        beyond: {"freeze_datetime_value": "1.7"},
        worded: {"freeze_datetime_value": "No"},
    }
    rejects, cards = _import(_edited(LLM, tmp_path / LLM.name, "questions", edits), tmp_path / "c")
    assert rejects == {
        _where(questions, text): (
            "field 'freeze_datetime_value': not a probability in [0, 1] ('about a third')"
        ),
        _where(
            questions, beyond
        ): "field 'freeze_datetime_value': not a probability in [0, 1] ('1.7')",
    }
    q = questions[worded]
    made = [c for k, c in cards.items() if k.startswith(f"wikipedia-{q['id']}-")]
    assert len(made) == len(q["resolution_dates"])
    assert "Value at 2025-10-16: No" in made[0]["context"]


def test_a_question_without_id_source_or_text_is_rejected_naming_what_is_missing(
    tmp_path: Path,
) -> None:
    questions = _questions()
    no_source, no_two = _first(questions, "acled"), _first(questions, "dbnomics")
    edits: dict[int, dict[str, Any]] = {
        no_source: {"source": None},
        no_two: {"id": "N/A", "question": ""},
    }
    rejects, _ = _import(_edited(LLM, tmp_path / LLM.name, "questions", edits), tmp_path / "c")
    assert rejects == {
        _where(questions, no_source): "field 'source': missing",
        f"questions.{no_two} (id ?)": "fields 'id' and 'question': missing",
    }


def test_a_resolution_set_that_makes_no_label_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    """As `cards import` refuses a set none of whose questions makes a card, `cards labels`
    refuses one none of whose rows makes a label: no rows, rows that are not resolutions, or
    only rows left (here the slice's rows, each unresolved data-set row or without `resolved`),
    exit 2, the reasons counted on the error line, no folder written."""
    doc = json.loads(RESOLUTIONS.read_text(encoding="utf-8"))
    rows = [{k: v for k, v in r.items() if k != "resolved"} for r in _rows()]
    cases = {
        "empty": ({**doc, "resolutions": []}, "none of its 0 row(s) makes a label"),
        "numbers": ([1, 2], "none of its 2 row(s) makes a label: 2 not an object"),
        "unresolved": (
            {**doc, "resolutions": rows},
            f"none of its {len(rows)} row(s) makes a label: ",
        ),
    }
    for name, (data, says) in cases.items():
        source = tmp_path / f"{name}.json"
        source.write_text(json.dumps(data), encoding="utf-8")
        out = tmp_path / name
        done = invoke("cards", "labels", source, "-o", out)
        assert done.code == 2 and done.out == "", (name, done.out)
        (line,) = done.err.strip().splitlines()
        assert line.startswith(f"error: {source}: field 'resolutions': {says}"), line
        assert not out.exists()
