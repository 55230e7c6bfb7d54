"""`export` and `score --forecastbench` answer a round with forecasts made for it only: a study
none of whose cards come from the question set's round is refused by export, and the jobs of
another round's cards in a mixed study, or forecasts dated after the round's due date, are left
out, counted and named, never taken for this round's forecasts; labels of another round's
resolution set are refused. On the real ForecastBench slices (2024-07-21 human, 2025-10-26
llm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support import invoke
from worldsim.domain.forecastbench import MARKET_SOURCES
from worldsim.interop.forecast_file import check_forecast_file

DATA = Path(__file__).parent / "data"
LLM = DATA / "2025-10-26-llm.json"
HUMAN = DATA / "2024-07-21-human.json"
RESOLUTIONS = DATA / "2025-10-26_resolution_set.json"
OTHER_LLM = "2025-10-26-llm.json (due 2025-10-26)"
OTHER_HUMAN = "2024-07-21-human.json (due 2024-07-21)"


def _markets(cards: Path, n: int) -> list[Path]:
    return [p for p in sorted(cards.glob("*.yaml")) if p.stem.split("-")[0] in MARKET_SOURCES][:n]


def _study(root: Path, name: str, cards: list[Path], dates: tuple[str, ...] = ("card",)) -> Path:
    manifest = root / f"{name}.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "cards": [str(p) for p in cards],
                "seeds": [0],
                "forecast_dates": list(dates),
                "methods": [{"label": "direct", "forecast": {"model": "offline"}}],
            }
        ),
        encoding="utf-8",
    )
    done = invoke("batch", manifest, "--out", root / name)
    assert done.code == 0, done.err
    return root / name


@pytest.fixture(scope="module")
def studies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A study of three market cards of the 2025-10-26 llm round, and one of those and three of
    the 2024-07-21 human round."""
    root = tmp_path_factory.mktemp("rounds")
    for name, source in (("llm", LLM), ("human", HUMAN)):
        assert invoke("cards", "import", source, "-o", root / name).code == 0
    labels = root / "labels"
    assert invoke("cards", "labels", RESOLUTIONS, "-o", labels, "--cards", root / "llm").code == 0
    llm, human = _markets(root / "llm", 3), _markets(root / "human", 3)
    return {
        "root": root,
        "labels": labels,
        "llm": _study(root, "llm-study", llm),
        "mixed": _study(root, "mixed-study", llm + human),
        "late": _study(root, "late-study", llm, ("late",)),
    }


def _export(study: Path, question_set: Path, out: Path) -> tuple[int, str, str]:
    done = invoke("export", study, "--method", "direct", "--question-set", question_set, "-o", out)
    return done.code, done.out, done.err


def test_a_study_of_another_round_is_refused_naming_both_rounds(
    studies: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "sub.json"
    code, _, err = _export(studies["llm"], HUMAN, out)
    assert code == 2 and "Traceback" not in err
    assert err.strip() == (
        f"error: {HUMAN}: field '--question-set': none of the study's jobs is of this question "
        f"set's round, {OTHER_HUMAN}: its cards are of {OTHER_LLM}"
    )
    assert not out.exists()
    code, _, err = _export(studies["llm"], LLM, out)
    assert code == 0 and "warning" not in err
    assert check_forecast_file(out, LLM).ok


@pytest.mark.parametrize(
    ("question_set", "other"), [(LLM, OTHER_HUMAN), (HUMAN, OTHER_LLM)], ids=["llm", "human"]
)
def test_a_mixed_study_answers_each_round_with_its_own_cards_and_names_the_others(
    studies: dict[str, Path], tmp_path: Path, question_set: Path, other: str
) -> None:
    out = tmp_path / "sub.json"
    code, printed, err = _export(studies["mixed"], question_set, out)
    assert code == 0, err
    assert err.strip() == f"warning: 3 job(s) of cards of another round, {other}, left out"
    assert "3 job(s) left out" in printed
    assert check_forecast_file(out, question_set).ok
    submitted = json.loads(out.read_text(encoding="utf-8"))
    answered = [f for f in submitted["forecasts"] if "worldsim method 'direct'" in f["reasoning"]]
    assert len(answered) == 3  # the round's own three market cards, each from its own job
    rows = json.loads(question_set.read_text(encoding="utf-8"))["questions"]
    ours = {(q["source"], str(q["id"])) for q in rows}
    assert {(f["source"], f["id"]) for f in answered} <= ours


def test_the_human_and_llm_sets_of_one_date_are_one_round(
    studies: dict[str, Path], tmp_path: Path
) -> None:
    # the llm set of 2024-07-21, of which the human set is a part: the same due date
    doc = json.loads(HUMAN.read_text(encoding="utf-8"))
    llm_2024 = tmp_path / "2024-07-21-llm.json"
    llm_2024.write_text(json.dumps({**doc, "question_set": "2024-07-21-llm.json"}), "utf-8")
    out = tmp_path / "sub.json"
    code, _, err = _export(studies["mixed"], llm_2024, out)
    assert code == 0, err
    assert err.strip() == f"warning: 3 job(s) of cards of another round, {OTHER_LLM}, left out"
    assert check_forecast_file(out, llm_2024).ok


def _score(study: Path, labels: Path, out: Path) -> tuple[int, str, str]:
    done = invoke("score", study, "--labels", labels, "--forecastbench", LLM, "--json", out)
    return done.code, done.out, done.err


@pytest.mark.parametrize(
    ("study", "why"),
    [
        ("mixed", "cards of another round (2024-07-21)"),
        ("late", "made after the round's due date"),
    ],
)
def test_score_takes_only_the_forecasts_made_for_the_round(
    studies: dict[str, Path], tmp_path: Path, study: str, why: str
) -> None:
    """The three llm cards' forecasts at their own date answer the round; the mixed study's
    human cards (another round) and the late study's forecasts (after the due date) do not."""
    code, printed, err = _score(studies["llm"], studies["labels"], tmp_path / "own.json")
    assert code == 0, err
    own = json.loads((tmp_path / "own.json").read_text(encoding="utf-8"))["forecastbench"]
    assert own["left_out"] == {}
    code, printed, err = _score(studies[study], studies["labels"], tmp_path / "s.json")
    assert code == 0, err
    doc = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))["forecastbench"]
    assert doc["left_out"] == {why: 3}
    assert f"left out: 3 forecast(s) not made for this round: {why}" in printed
    (mine,) = [s for s in doc["scores"] if s["method"] == "direct"]
    (theirs,) = [s for s in own["scores"] if s["method"] == "direct"]
    if study == "mixed":  # the round's own three cards score as in the study of them alone
        assert mine == theirs
    else:  # nothing made for the round: every row imputed, as Always 0.5 scores it
        assert mine["imputed"] == mine["n_dataset"] + mine["n_market"]
        half = next(s for s in doc["scores"] if s["method"].startswith("Always 0.5"))
        assert (mine["dataset"], mine["market"]) == (half["dataset"], half["market"])


@pytest.mark.parametrize("name", ["2026-03-01_resolution_set.json", "r0301.json"])
def test_labels_of_another_rounds_resolution_set_are_refused(
    studies: dict[str, Path], tmp_path: Path, name: str
) -> None:
    """The slice's resolution set re-dated as a later round's: market questions recur across
    rounds with the same ids, so only the round each label records (the set's
    forecast_due_date) tells the rounds apart, under any file name."""
    doc = json.loads(RESOLUTIONS.read_text(encoding="utf-8"))
    later = tmp_path / name
    later.write_text(json.dumps({**doc, "forecast_due_date": "2026-03-01"}), encoding="utf-8")
    labels = tmp_path / "labels"
    assert invoke("cards", "labels", later, "-o", labels).code == 0
    written = yaml.safe_load(next(labels.glob("*.yaml")).read_text(encoding="utf-8"))
    assert (written["sources"], written["forecast_due_date"]) == ([name], "2026-03-01")
    out = tmp_path / "s.json"
    code, printed, err = _score(studies["llm"], labels, out)
    assert code == 2 and printed == "" and not out.exists()
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {labels}/") and ".yaml: field 'forecast_due_date'" in line
    assert "the round due 2026-03-01, but the question set 2025-10-26-llm.json is due" in line
    later.write_text(json.dumps({**doc, "forecast_due_date": "soon"}), encoding="utf-8")
    undated = invoke("cards", "labels", later, "-o", tmp_path / "undated")
    assert undated.code == 2 and not (tmp_path / "undated").exists()
    assert "field 'forecast_due_date': not a YYYY-MM-DD date: 'soon'" in undated.err


def test_labels_that_record_no_round_are_told_apart_by_their_sources(
    studies: dict[str, Path], tmp_path: Path
) -> None:
    """A label without forecast_due_date (written by hand, or by an earlier worldsim) is of the
    round its resolution set's file name dates."""
    doc = json.loads(RESOLUTIONS.read_text(encoding="utf-8"))
    later = tmp_path / "2026-03-01_resolution_set.json"
    later.write_text(json.dumps({**doc, "forecast_due_date": "2026-03-01"}), encoding="utf-8")
    labels = tmp_path / "labels"
    assert invoke("cards", "labels", later, "-o", labels).code == 0
    for f in labels.glob("*.yaml"):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        del data["forecast_due_date"]
        f.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, printed, err = _score(studies["llm"], labels, tmp_path / "s.json")
    assert code == 2 and printed == ""
    (line,) = err.strip().splitlines()
    assert f"error: {labels}" in line and "field 'sources'" in line
    assert "the round due 2026-03-01, but the question set 2025-10-26-llm.json is due" in line


def test_a_combination_row_of_a_combination_the_round_holds_checks_clean(tmp_path: Path) -> None:
    """The 2024-07-21 llm round held combination questions (their id lists are the real
    resolution set's); ForecastBench's reader keeps a forecast of one and resolves it. One the
    round does not hold is never scored, and the check says so."""
    from worldsim.domain.forecastbench import question_rows

    resolved = json.loads((DATA / "2024-07-21_resolution_set.json").read_text(encoding="utf-8"))
    combos = {tuple(r["id"]): r for r in resolved["resolutions"] if isinstance(r["id"], list)}
    doc = json.loads(HUMAN.read_text(encoding="utf-8"))
    single = {q["id"]: q for q in doc["questions"]}
    doc["question_set"] = "2024-07-21-llm.json"
    for ids in combos:
        parts = [single[i] for i in ids]
        doc["questions"].append({**parts[0], "id": list(ids), "combination_of": parts})
    question_set = tmp_path / "2024-07-21-llm.json"
    question_set.write_text(json.dumps(doc), encoding="utf-8")
    rows = [
        {"id": qid, "source": source, "forecast": 0.5, "resolution_date": day}
        for source, qid, day in question_rows(doc)
    ]
    held = next(iter(combos.values()))
    combination = {
        "id": held["id"],
        "source": held["source"],
        "direction": held["direction"],
        "forecast": 0.3,
        "resolution_date": held["resolution_date"],
    }
    submission = {
        "organization": "Lab",
        "model": "m",
        "model_organization": "Lab",
        "question_set": "2024-07-21-llm.json",
        "forecasts": [*rows, combination],
    }
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(submission), encoding="utf-8")
    assert check_forecast_file(path, question_set).problems == ()
    submission["forecasts"].append({**combination, "id": [held["id"][1], held["id"][0]]})
    path.write_text(json.dumps(submission), encoding="utf-8")
    (problem,) = check_forecast_file(path, question_set).problems
    assert problem == f"forecasts.{len(rows) + 1}: a combination question the round does not hold"
    # the round resolves a combination at each of its directions, and a row at no other
    for direction in (None, "up", [1], [1, 2]):
        submission["forecasts"][-1] = {**combination, "direction": direction}
        path.write_text(json.dumps(submission), encoding="utf-8")
        (problem,) = check_forecast_file(path, question_set).problems
        assert problem.startswith(
            f"forecasts.{len(rows) + 1}: direction {direction!r} is not one of the combination's: "
            "the row matches no resolution"
        ), problem
    # a single question's row with no direction, null or [] is one the resolver matches
    for direction in (None, []):
        submission["forecasts"] = [{**r, "direction": direction} for r in rows]
        path.write_text(json.dumps(submission), encoding="utf-8")
        assert check_forecast_file(path, question_set).problems == ()


def _table(path: Path, rows: list[tuple[str, ...]], header: str = "card_id,method,p_yes") -> Path:
    path.write_text("\n".join([header, *(",".join(r) for r in rows)]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("case", ["row twice", "no run ids", "trace twice"])
def test_duplicate_predictions_are_refused_with_forecastbench_as_without(
    studies: dict[str, Path], tmp_path: Path, case: str
) -> None:
    """`score --forecastbench` reads predictions as the plain score does: the same row twice,
    two rows without a run id for one market, or one trace given twice is refused, exit 2, with
    the same line, and nothing averaged or written."""
    card = _markets(studies["root"] / "llm", 1)[0].stem
    if case == "trace twice":
        trace = next((studies["llm"] / "traces").rglob("*.jsonl"))
        inputs: list[Path] = [trace, trace]
        where = f"error: {trace}: field 'run_id': duplicate prediction for card '{card}'"
    else:
        rows = (
            [(card, "t", "0.3", "r1"), (card, "t", "0.3", "r1")]
            if case == "row twice"
            else [(card, "t", "0.3"), (card, "t", "0.9")]
        )
        header = "card_id,method,p_yes" + (",run_id" if case == "row twice" else "")
        table = _table(tmp_path / "t.csv", rows, header)
        inputs = [table]
        where = f"error: {table}:3: field 'run_id': duplicate prediction for card '{card}'"
    out = tmp_path / "s.json"
    fb = invoke(
        "score", *inputs, "--labels", studies["labels"], "--forecastbench", LLM, "--json", out
    )
    plain = invoke("score", *inputs, "--labels", studies["labels"])
    assert (fb.code, plain.code) == (2, 2) and fb.out == "" and not out.exists()
    (line,) = fb.err.strip().splitlines()
    assert line == plain.err.strip()
    assert line.startswith(where), line
