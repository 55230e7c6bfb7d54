"""Question sets in (`worldsim cards import`) and forecasts out (`worldsim export`)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml

from tests.support import ROOT, invoke
from worldsim.domain.cards import load_card
from worldsim.interop.export import Submission, submission_schema

QUESTION_SET = ROOT / "scenarios" / "forecastbench" / "question_set.json"


def test_a_forecastbench_set_becomes_cards_and_rejects(tmp_path: Path) -> None:
    done = invoke("cards", "import", QUESTION_SET, "-o", tmp_path)
    assert done.code == 0, done.err
    assert "4 card(s) from 5 question(s) of 2027-02-01-demo.json (due 2027-02-01)" in done.out
    rejects = tmp_path / "rejects.jsonl"
    said = " ".join(done.out.split())
    assert f"2 rejected ({rejects}): 1 combination; 1 no valid market close date" in said
    names = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert names == [
        "dbnomics-GRAIN-IDX-2027-03-02.yaml",
        "dbnomics-GRAIN-IDX-2027-05-01.yaml",
        "manifold-harbour-bridge-toll.yaml",
        "metaculus-orchard-valley-rail.yaml",
    ]
    grain = load_card(tmp_path / names[1])
    assert grain.question == (
        "Will the Vellmark grain price index be higher on 2027-05-01 than on 2027-02-01?"
    )
    assert grain.deadline.isoformat().startswith("2027-05-01")
    assert grain.provenance is not None and grain.provenance.question_id == "GRAIN-IDX"
    assert grain.seeds is None and "Value at 2027-01-31: 103.2 (the index value)" in grain.context
    toll = load_card(tmp_path / names[2])
    assert toll.deadline.isoformat().startswith("2027-05-01")  # the market's close
    assert toll.provenance is not None and toll.provenance.source == "manifold"
    rejects = [
        json.loads(line)
        for line in (tmp_path / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [r["reason"] for r in rejects] == ["combination", "no valid market close date"]
    assert "toll-and-rail" in rejects[0]["where"]


def test_plain_question_lists(tmp_path: Path) -> None:
    rows = tmp_path / "questions.csv"
    with rows.open("w", encoding="utf-8-sig", newline="") as f:  # a BOM, as spreadsheets write
        out = csv.writer(f)
        out.writerow(["id", "question", "as_of", "deadline", "background", "outcomes"])
        out.writerow(["q1", "Will it rain?", "2027-01-01", "2027-02-01", "Dry month.", ""])
        out.writerow(["q2", "Who wins?", "2027-01-01", "2027-03-01", "", "Ana|Bo|Cy"])
        out.writerow(["q3", "When?", "soon", "2027-03-01", "", ""])
        out.writerow(["q4", "One way?", "2027-01-01", "2027-03-01", "", "Only"])
        out.writerow(["q5", "Backwards?", "2027-03-01", "2027-01-01", "", ""])
        out.writerow(["q1", "Again?", "2027-01-01", "2027-02-01", "", ""])
        out.writerow(["q6", "Naive?", "2027-01-01", "2027-02-01T10:00:00", "", ""])
    done = invoke("cards", "import", rows, "-o", tmp_path / "cards")
    assert done.code == 0, done.err
    assert load_card(tmp_path / "cards" / "q1.yaml").kind == "binary"
    choice = load_card(tmp_path / "cards" / "q2.yaml")
    assert choice.kind == "multiple_choice"
    assert [e.title for e in choice.endpoints] == ["Ana", "Bo", "Cy"]
    reasons = [
        json.loads(line)["reason"]
        for line in (tmp_path / "cards" / "rejects.jsonl").read_text().splitlines()
    ]
    assert reasons[0] == "field 'as_of': not an ISO date or datetime: 'soon'"
    assert reasons[1] == "outcomes needs two or more, separated by |"
    assert reasons[2] == "field 'deadline': must be after as_of"
    assert reasons[3] == "card id 'q1' given twice"
    assert reasons[4] == (
        "field 'deadline': datetime '2027-02-01T10:00:00' has no timezone; add 'Z' or an offset"
    )

    lines = tmp_path / "questions.jsonl"
    lines.write_text(
        json.dumps(
            {"question": "Will the dam open?", "as_of": "2027-01-01", "deadline": "2027-06-01"}
        )
        + "\n",
        encoding="utf-8",
    )
    assert invoke("cards", "import", lines, "-o", tmp_path / "more").code == 0
    (card,) = (tmp_path / "more").glob("*.yaml")
    assert load_card(card).provenance.source_file == "questions.jsonl"  # type: ignore[union-attr]


def test_a_file_that_is_no_question_set_is_refused(tmp_path: Path) -> None:
    wrong = tmp_path / "set.json"
    wrong.write_text('{"items": []}', encoding="utf-8")
    other = tmp_path / "set.txt"
    other.write_text("hello", encoding="utf-8")
    for path in (wrong, other):
        done = invoke("cards", "import", path, "-o", tmp_path / "out")
        assert done.code == 2 and str(path) in done.err
    assert not (tmp_path / "out").exists()


def test_a_study_on_imported_cards_exports_a_valid_submission(tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    assert invoke("cards", "import", QUESTION_SET, "-o", cards).code == 0
    manifest = tmp_path / "study.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": "fb-study",
                "cards": [str(cards / "*.yaml")],
                "seeds": [0, 1, 2],
                "methods": [
                    {
                        "label": "sim",
                        "run": {"policy": "no_branch", "ticks": 2, "model": "offline"},
                    },
                    {"label": "direct", "forecast": {"model": "offline"}},
                ],
            }
        ),
        encoding="utf-8",
    )
    study = tmp_path / "study"
    assert invoke("batch", manifest, "--out", study).code == 0
    out = tmp_path / "submission.json"
    done = invoke(
        "export",
        study,
        "--method",
        "sim",
        "-o",
        out,
        "--organization",
        "Lab",
        "--aggregate",
        "mean",
        "--question-set",
        QUESTION_SET,
    )
    assert done.code == 0, done.err
    submission = Submission.model_validate_json(out.read_text(encoding="utf-8"))
    assert submission.organization == "Lab" and submission.model == "sim"
    assert submission.model_organization == "Lab"
    assert (submission.question_set, submission.forecast_due_date) == (
        "2027-02-01-demo.json",
        "2027-02-01",
    )
    by_key = {(f.id, f.resolution_date): f for f in submission.forecasts}
    assert set(by_key) == {
        ("GRAIN-IDX", "2027-03-02"),
        ("GRAIN-IDX", "2027-05-01"),
        ("harbour-bridge-toll", None),
        ("orchard-valley-rail", None),
        ("undated", None),  # no card: the fallback, listed
    }
    assert by_key[("undated", None)].forecast == 0.5
    assert "fallback infer undated: 0.5" in done.out
    rows = [json.loads(line) for line in (study / "predictions.jsonl").read_text().splitlines()]
    toll = [
        r["p_yes"] for r in rows if r["method"] == "sim" and r["card_id"].startswith("manifold")
    ]
    assert by_key[("harbour-bridge-toll", None)].forecast == round(sum(toll) / len(toll), 6)
    assert by_key[("harbour-bridge-toll", None)].source == "manifold"
    assert all(f.reasoning for f in submission.forecasts)

    table = tmp_path / "submission.csv"
    assert invoke("export", study, "--method", "sim", "--format", "csv", "-o", table).code == 0
    assert len(table.read_text(encoding="utf-8").splitlines()) == 1 + 4

    unknown = invoke(
        "export",
        study,
        "--method",
        "nope",
        "-o",
        tmp_path / "x.json",
        "--question-set",
        QUESTION_SET,
    )
    assert unknown.code == 2 and "sim" in unknown.err and not (tmp_path / "x.json").exists()
    no_round = invoke("export", study, "--method", "sim", "-o", tmp_path / "y.json")
    assert no_round.code == 2 and "--question-set" in no_round.err
    assert not (tmp_path / "y.json").exists()


def test_the_published_submission_schema_matches_the_model() -> None:
    path = ROOT / "docs" / "forecastbench-submission.schema.json"
    assert path.read_text(encoding="utf-8") == submission_schema()


def test_a_resolution_set_labels_the_imported_cards_and_scores_a_study(tmp_path: Path) -> None:
    resolutions = ROOT / "scenarios" / "forecastbench" / "resolution_set.json"
    cards, labels = tmp_path / "cards", tmp_path / "labels"
    assert invoke("cards", "import", QUESTION_SET, "-o", cards).code == 0
    made = invoke("cards", "labels", resolutions, "-o", labels)
    assert made.code == 0, made.err
    assert "5 label(s) from 6 row(s)" in made.out
    assert "1 provisional market, 2 resolved data-set, 2 resolved market" in made.out
    made_labels = {p.stem for p in labels.glob("*.yaml")}
    assert made_labels == {p.stem for p in cards.glob("*.yaml")} | {"manifold-pending"}
    reasons = [json.loads(x)["reason"] for x in (labels / "rejects.jsonl").read_text().splitlines()]
    assert reasons == ["resolved to 0.5, neither 0 nor 1"]
    manifest = tmp_path / "study.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": "fb-scored",
                "cards": [str(cards / "*.yaml")],
                "seeds": [0],
                "methods": [{"label": "direct", "forecast": {"model": "offline"}}],
            }
        ),
        encoding="utf-8",
    )
    assert invoke("batch", manifest, "--out", tmp_path / "study").code == 0
    report = tmp_path / "score.json"
    scored = invoke("score", tmp_path / "study", "--labels", labels, "--json", report)
    assert scored.code == 0, scored.err
    assert "n_matched=4" in scored.out  # every imported card found its imported label


def test_two_rows_that_resolve_one_question_differently_make_no_label(tmp_path: Path) -> None:
    data = json.loads((ROOT / "scenarios" / "forecastbench" / "resolution_set.json").read_text())
    rows = data["resolutions"] if isinstance(data, dict) else data
    resolved = next(r for r in rows if r.get("resolved_to") in (0, 1, 0.0, 1.0) and r["resolved"])
    flipped = {**resolved, "resolved_to": 1 - resolved["resolved_to"]}
    source = tmp_path / "resolutions.json"
    for extra, reason in ((resolved, "a row repeated"), (flipped, "contradicts resolutions.")):
        rows_now = [*rows, extra]
        source.write_text(
            json.dumps({**data, "resolutions": rows_now} if isinstance(data, dict) else rows_now)
        )
        labels = tmp_path / f"labels-{reason[:5]}"
        made = invoke("cards", "labels", source, "-o", labels)
        assert made.code == 0, made.err
        rejects = [json.loads(x) for x in (labels / "rejects.jsonl").read_text().splitlines()]
        assert any(reason in r["reason"] for r in rejects)
        named = [p for p in labels.glob("*.yaml") if resolved["id"] in p.stem]
        if extra is flipped:  # neither answer is taken
            assert named == []
            assert any("contradicted by a later row" in r["reason"] for r in rejects)
        else:
            assert len(named) == 1
