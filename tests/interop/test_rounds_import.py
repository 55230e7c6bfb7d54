"""Real ForecastBench rounds in: the 2024-07-21 human set and the 2025-10-26 llm set (slices
of the published files, tests/interop/data) become cards, and their resolution sets labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import invoke
from worldsim.domain.cards import load_card
from worldsim.domain.forecastbench import DATASET_SOURCES, MARKET_SOURCES, is_combination
from worldsim.interop.questions import import_questions

DATA = Path(__file__).parent / "data"
HUMAN = DATA / "2024-07-21-human.json"
LLM = DATA / "2025-10-26-llm.json"
ROUNDS = {
    HUMAN: DATA / "2024-07-21_resolution_set.json",
    LLM: DATA / "2025-10-26_resolution_set.json",
}


def _questions(path: Path) -> list[dict[str, Any]]:
    questions: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["questions"]
    return questions


def _expected_cards(path: Path) -> int:
    """Cards a set should give: one per market question, one per data-set question and date."""
    return sum(
        1 if q["source"] in MARKET_SOURCES else len(q["resolution_dates"])
        for q in _questions(path)
        if not is_combination(q)
    )


def _rejects(folder: Path) -> list[dict[str, str]]:
    lines = (folder / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("question_set", [HUMAN, LLM], ids=["2024-07-21-human", "2025-10-26-llm"])
def test_a_round_imports_every_non_combination_question(question_set: Path, tmp_path: Path) -> None:
    done = invoke("cards", "import", question_set, "-o", tmp_path)
    assert done.code == 0, done.err
    made = sorted(tmp_path.glob("*.yaml"))
    expected = _expected_cards(question_set)
    assert len(made) >= 0.99 * expected
    assert len(made) + len(_rejects(tmp_path)) >= expected
    assert all(r["reason"] for r in _rejects(tmp_path))
    assert f"{len(made)} card(s) from {len(_questions(question_set))} question(s)" in done.out


def test_an_imported_card_keeps_what_decides_its_question(tmp_path: Path) -> None:
    """A Metaculus card keeps the market's own resolution criteria, the source's introduction,
    the url, the market's dates and the freeze value with its explanation; its provenance names
    the round."""
    assert invoke("cards", "import", LLM, "-o", tmp_path).code == 0
    question = next(
        q
        for q in _questions(LLM)
        if q["source"] == "metaculus" and q["market_info_resolution_criteria"] != "N/A"
    )
    card = load_card(tmp_path / f"metaculus-{question['id']}.yaml")
    assert question["market_info_resolution_criteria"].strip() in card.context
    assert question["source_intro"].strip() in card.context
    assert f"Value at 2025-10-16: {question['freeze_datetime_value']}" in card.context
    p = card.provenance
    assert p is not None
    assert (p.question_set, str(p.forecast_due_date)) == ("2025-10-26-llm.json", "2025-10-26")
    assert p.url == question["url"]
    assert (p.market_open, p.market_close) == (
        question["market_info_open_datetime"],
        question["market_info_close_datetime"],
    )
    assert p.freeze_value == question["freeze_datetime_value"]
    assert p.freeze_value_explanation == question["freeze_datetime_value_explanation"]
    assert card.seeds is not None
    assert card.seeds.base_rate == float(question["freeze_datetime_value"])
    assert "freeze value" in (card.seeds.prior_source or "")


def test_a_market_that_never_closes_ends_at_the_latest_date_a_card_holds(tmp_path: Path) -> None:
    """Metaculus 7903 closes 2300-01-01 ("never"): its card ends 2200-01-01 and keeps the
    market's own close date."""
    assert invoke("cards", "import", LLM, "-o", tmp_path).code == 0
    card = load_card(tmp_path / "metaculus-7903.yaml")
    assert card.deadline.isoformat().startswith("2200-01-01")
    assert card.provenance is not None and card.provenance.market_close == (
        "2300-01-01T05:00:00+00:00"
    )


def test_data_set_questions_fill_in_their_dates_and_carry_no_prior(tmp_path: Path) -> None:
    assert invoke("cards", "import", HUMAN, "-o", tmp_path).code == 0
    question = next(q for q in _questions(HUMAN) if q["source"] == "fred")
    for day in question["resolution_dates"]:
        card = load_card(tmp_path / f"fred-{question['id']}-{day}.yaml")
        assert day in card.question and "2024-07-21" in card.question
        assert "{" not in card.question
        assert card.deadline.date().isoformat() == day
        assert card.provenance is not None and str(card.provenance.resolution_date) == day
        assert card.seeds is None  # no naive forecast given: the generic world's 0.5


def test_only_real_combination_questions_are_rejected_as_combination(tmp_path: Path) -> None:
    """The human set marks every question `combination_of: "N/A"`: none is a combination. A
    combination in the shape ForecastBench's create_question_set wrote (an id list and the
    combined questions) is rejected with the reason "combination"."""
    doc = json.loads(HUMAN.read_text(encoding="utf-8"))
    assert {q["combination_of"] for q in doc["questions"]} == {"N/A"}
    first, second = [q for q in doc["questions"] if q["source"] == "acled"][:2]
    combo = {
        "id": [first["id"], second["id"]],
        "source": "acled",
        "combination_of": [first | {"resolution_dates": "N/A"}, second],
        "question": "We are presenting you with two probability questions.",
        "background": "N/A",
        "market_info_resolution_criteria": "N/A",
        "market_info_open_datetime": "N/A",
        "market_info_close_datetime": "N/A",
        "url": "N/A",
        "resolution_criteria": "N/A",
        "freeze_datetime_value": "N/A",
        "freeze_datetime_value_explanation": "N/A",
        "freeze_datetime": first["freeze_datetime"],
        "source_intro": "N/A",
        "resolution_dates": first["resolution_dates"],
    }
    path = tmp_path / "2024-07-21-llm.json"
    path.write_text(json.dumps(doc | {"questions": [*doc["questions"], combo]}), encoding="utf-8")
    imported = import_questions(path)
    assert [r.reason for r in imported.rejects] == ["combination"]
    assert len(imported.cards) == _expected_cards(HUMAN)


def test_a_market_card_starts_at_its_freeze_value_and_a_data_set_card_at_the_naive_forecast(
    tmp_path: Path,
) -> None:
    """With the round's Naive Forecaster file (`--naive`), a data-set card's prior is its naive
    forecast; a market card's is its freeze value either way."""
    doc = json.loads(HUMAN.read_text(encoding="utf-8"))
    dataset = [q for q in doc["questions"] if q["source"] in DATASET_SOURCES][:3]
    naive = {  # the shape ForecastBench's naive_and_dummy_forecasters writes
        "organization": "ForecastBench",
        "model_organization": "ForecastBench",
        "question_set": "2024-07-21-human.json",
        "forecast_due_date": "2024-07-21",
        "model": "Naive Forecaster",
        "forecasts": [
            {
                "id": q["id"],
                "source": q["source"],
                "forecast": 0.3 + 0.1 * i,
                "resolution_date": q["resolution_dates"][0],
                "reasoning": "",
            }
            for i, q in enumerate(dataset)
        ],
    }
    naive_file = tmp_path / "naive.json"
    naive_file.write_text(json.dumps(naive), encoding="utf-8")
    out = tmp_path / "cards"
    assert invoke("cards", "import", HUMAN, "-o", out, "--naive", naive_file).code == 0
    for i, q in enumerate(dataset):
        card = load_card(out / f"{q['source']}-{q['id']}-{q['resolution_dates'][0]}.yaml")
        assert card.seeds is not None and card.seeds.base_rate == pytest.approx(0.3 + 0.1 * i)
        assert "naive" in (card.seeds.prior_source or "")
        later = load_card(out / f"{q['source']}-{q['id']}-{q['resolution_dates'][1]}.yaml")
        assert later.seeds is None
    market = next(q for q in doc["questions"] if q["source"] == "polymarket")
    card = load_card(out / f"polymarket-{market['id']}.yaml")
    assert card.seeds is not None
    assert card.seeds.base_rate == float(market["freeze_datetime_value"])
    other = naive | {"question_set": "2025-10-26-llm.json", "forecast_due_date": "2025-10-26"}
    naive_file.write_text(json.dumps(other), encoding="utf-8")
    refused = invoke("cards", "import", HUMAN, "-o", tmp_path / "x", "--naive", naive_file)
    assert refused.code == 2 and "--naive" in refused.err and not (tmp_path / "x").exists()


def test_a_round_is_refused_in_a_folder_holding_another_rounds_cards(tmp_path: Path) -> None:
    assert invoke("cards", "import", HUMAN, "-o", tmp_path).code == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    again = invoke("cards", "import", HUMAN, "-o", tmp_path)
    assert again.code == 0, again.err  # the same round again is fine
    other = invoke("cards", "import", LLM, "-o", tmp_path)
    assert other.code == 2
    assert str(tmp_path) in other.err and "2024-07-21-human.json" in other.err
    assert len(other.err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def _labels(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in folder.glob("*.yaml")}


@pytest.mark.parametrize("question_set", [HUMAN, LLM], ids=["2024-07-21", "2025-10-26"])
def test_every_label_of_a_resolution_set_names_a_card_of_its_round(
    question_set: Path, tmp_path: Path
) -> None:
    """One label per row of a single question, named after its card (a data-set question at
    each resolution date, a market question once); combination rows are left as such."""
    cards, labels = tmp_path / "cards", tmp_path / "labels"
    assert invoke("cards", "import", question_set, "-o", cards).code == 0
    resolutions = ROUNDS[question_set]
    done = invoke("cards", "labels", resolutions, "-o", labels, "--cards", cards)
    assert done.code == 0, done.err
    made = _labels(labels)
    card_ids = {p.stem for p in cards.glob("*.yaml")}
    assert made and set(made) <= card_ids
    rows = json.loads(resolutions.read_text(encoding="utf-8"))["resolutions"]
    ours = {(r["source"], r["id"]) for r in rows if isinstance(r["id"], str)}
    for row in rows:
        if isinstance(row["id"], list):
            continue
        market = row["source"] in MARKET_SOURCES
        name = f"{row['source']}-{row['id']}" + ("" if market else f"-{row['resolution_date']}")
        if name not in card_ids:
            continue
        label = made[name]
        if row["resolved"]:
            assert label["outcome"] == ("yes" if row["resolved_to"] == 1 else "no")
            assert str(label["resolved_at"]).startswith(row["resolution_date"])
        else:
            assert market and label["outcome"] == "provisional"
            assert label["value"] == row["resolved_to"] and "resolved_at" not in label
            assert str(label["valued_at"]).startswith(row["resolution_date"])
    reasons = [r["reason"] for r in _rejects(labels)]
    combos = sum(isinstance(r["id"], list) for r in rows)
    assert reasons.count("combination") == combos
    outside = sum(1 for s, i in ours if not any(c.startswith(f"{s}-{i}") for c in card_ids))
    assert reasons.count("no card of this question among the cards given") >= outside
    assert "provisional market" in done.out or not any(
        not r["resolved"] for r in rows if isinstance(r["id"], str)
    )


def test_direction_variants_of_a_combination_are_left_not_resolved_twice(tmp_path: Path) -> None:
    """The 2024-07-21 set holds each combination four times, once per direction: every one is
    left as a combination, and no single question is said to be resolved twice."""
    done = invoke("cards", "labels", ROUNDS[HUMAN], "-o", tmp_path)
    assert done.code == 0, done.err
    reasons = {r["reason"] for r in _rejects(tmp_path)}
    assert reasons == {"combination"}
    assert not any("--" in p.stem for p in tmp_path.glob("*.yaml"))


def test_labels_of_another_round_are_refused_in_a_labels_folder(tmp_path: Path) -> None:
    assert invoke("cards", "labels", ROUNDS[HUMAN], "-o", tmp_path).code == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    other = invoke("cards", "labels", ROUNDS[LLM], "-o", tmp_path)
    assert other.code == 2 and "2024-07-21_resolution_set.json" in other.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    cards = tmp_path.parent / "llm-cards"
    assert invoke("cards", "import", LLM, "-o", cards).code == 0
    wrong = invoke("cards", "labels", ROUNDS[HUMAN], "-o", tmp_path / "x", "--cards", cards)
    assert wrong.code == 2 and "2025-10-26" in wrong.err and not (tmp_path / "x").exists()


def test_latest_llm_read_as_text_imports_the_set_it_points_to(tmp_path: Path) -> None:
    """ForecastBench's ``latest-llm.json`` is a git link; fetched as a file it holds the target's
    name. Import reads the set it names beside it, and a pointer to a missing set is refused."""
    (tmp_path / LLM.name).write_bytes(LLM.read_bytes())
    pointer = tmp_path / "latest-llm.json"
    pointer.write_text(LLM.name, encoding="utf-8")
    cards = tmp_path / "cards"
    assert invoke("cards", "import", pointer, "-o", cards).code == 0
    direct = import_questions(LLM)
    assert sorted(p.stem for p in cards.glob("*.yaml")) == sorted(c.id for c in direct.cards)
    provenance = load_card(next(cards.glob("*.yaml"))).provenance
    assert provenance is not None
    assert provenance.model_dump().get("question_set") == LLM.name

    dangling = tmp_path / "elsewhere" / "latest-llm.json"
    dangling.parent.mkdir()
    dangling.write_text("2026-08-16-llm.json\n", encoding="utf-8")
    refused = invoke("cards", "import", dangling, "-o", tmp_path / "none")
    assert refused.code == 2
    assert "latest-llm.json" in refused.err and "2026-08-16-llm.json" in refused.err
    assert not (tmp_path / "none").exists()
