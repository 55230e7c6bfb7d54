"""A real round out and scored: a study on the 2025-10-26 llm slice exported as the forecast file
ForecastBench's reader accepts, checked by that reader's rules, and scored as its leaderboard
scores a round."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import ROOT, invoke
from worldsim.domain.forecastbench import MARKET_SOURCES, horizon_dates, question_rows
from worldsim.interop.forecast_file import check_forecast_file
from worldsim.scoring.forecastbench import score_round
from worldsim.scoring.inputs import PredictionRow
from worldsim.scoring.labels import load_labels
from worldsim.scoring.metrics import binary_scores

DATA = Path(__file__).parent / "data"
LLM = DATA / "2025-10-26-llm.json"
RESOLUTIONS = DATA / "2025-10-26_resolution_set.json"


@pytest.fixture(scope="module")
def round_study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The slice's cards and labels, and a direct offline study (seeds 0 and 1) of its market
    cards and its data-set cards at the first resolution date (about a fifth of its rows)."""
    root = tmp_path_factory.mktemp("round")
    cards, labels = root / "cards", root / "labels"
    assert invoke("cards", "import", LLM, "-o", cards).code == 0
    assert invoke("cards", "labels", RESOLUTIONS, "-o", labels, "--cards", cards).code == 0
    first = horizon_dates(date(2025, 10, 26))[0]
    chosen = [
        p
        for p in sorted(cards.glob("*.yaml"))
        if p.stem.split("-")[0] in MARKET_SOURCES or p.stem.endswith(first)
    ]
    manifest = root / "study.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": "fb-round",
                "cards": [str(p) for p in chosen],
                "seeds": [0, 1],
                "methods": [{"label": "direct", "forecast": {"model": "offline"}}],
            }
        ),
        encoding="utf-8",
    )
    study = root / "study"
    done = invoke("batch", manifest, "--out", study)
    assert done.code == 0, done.err
    return {"root": root, "cards": cards, "labels": labels, "study": study}


def _export(
    round_study: dict[str, Path], name: str = "sub.json", question_set: Path = LLM
) -> tuple[Path, Any]:
    out = round_study["root"] / name
    done = invoke(
        "export",
        round_study["study"],
        "--method",
        "direct",
        "-o",
        out,
        "--question-set",
        question_set,
        "--organization",
        "Lab",
        "--model-organization",
        "worldsim",
    )
    assert done.code == 0, done.err
    return out, done


def test_an_exported_round_answers_every_row_and_passes_the_readers_check(
    round_study: dict[str, Path],
) -> None:
    out, done = _export(round_study)
    submission = json.loads(out.read_text(encoding="utf-8"))
    assert submission["organization"] == "Lab"
    assert submission["model_organization"] == "worldsim"
    assert submission["question_set"] == "2025-10-26-llm.json"
    assert submission["forecast_due_date"] == "2025-10-26"
    doc = json.loads(LLM.read_text(encoding="utf-8"))
    rows = question_rows(doc)
    answered = [(f["source"], f["id"], f["resolution_date"]) for f in submission["forecasts"]]
    assert sorted(answered, key=str) == sorted(rows, key=str)
    checked = invoke("export", "--check", out, "--question-set", LLM)
    assert checked.code == 0, checked.out
    assert f"answers all {len(rows)} question(s)" in checked.out
    # the README quotes the line for its round/submission.json of the whole slice, as printed
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    printed = " ".join(checked.out.replace(str(out), "round/submission.json").split())
    assert f"`{printed}`" in readme
    # the rows the study did not forecast carry the fallback, and the command lists them
    fallbacks = [line for line in done.out.splitlines() if line.startswith("fallback ")]
    forecast = {(f["source"], f["id"], f["resolution_date"]): f for f in submission["forecasts"]}
    studied = sum(1 for r in rows if r[2] is None or r[2] == "2025-11-02")
    assert len(fallbacks) == len(rows) - studied
    later = next(r for r in rows if r[2] == "2026-01-24")
    assert forecast[later]["forecast"] == 0.5 and "fallback" in forecast[later]["reasoning"]


def test_the_exported_number_is_the_seeds_mean_rounded_and_its_reasoning_says_so(
    round_study: dict[str, Path],
) -> None:
    out, _ = _export(round_study)
    submission = json.loads(out.read_text(encoding="utf-8"))
    predictions = [
        json.loads(line)
        for line in (round_study["study"] / "predictions.jsonl").read_text().splitlines()
    ]
    market = next(f for f in submission["forecasts"] if f["source"] == "polymarket")
    seeds = [p["p_yes"] for p in predictions if p["card_id"] == f"polymarket-{market['id']}"]
    assert len(seeds) == 2
    assert market["forecast"] == round(sum(seeds) / 2, 6)
    assert market["reasoning"].startswith("The mean of 2 seed(s)' p_yes")
    assert "), rounded to 6 decimals, from worldsim method 'direct'" in market["reasoning"]
    assert "direct/1" in market["reasoning"]


def _drop_first_date(submission: dict[str, Any], questions: int) -> None:
    """Leave out the forecasts of the first ``questions`` data-set questions at the round's
    first resolution date."""
    first = horizon_dates(date(2025, 10, 26))[0]
    at_first = [f for f in submission["forecasts"] if f["resolution_date"] == first]
    dropped = {f["id"] for f in at_first[:questions]}
    submission["forecasts"] = [
        f
        for f in submission["forecasts"]
        if not (f["resolution_date"] == first and f["id"] in dropped)
    ]


def _rewritten(path: Path, change: Any, tmp_path: Path) -> Path:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    out = tmp_path / "changed.json"
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.pop("model_organization"), "missing required field(s) model_organization"),
        (lambda d: d.update(question_set="llm-round.json"), "holds no YYYY-MM-DD"),
        (lambda d: d.update(question_set="round-2025-10-26-llm.json"), "first ten characters"),
        (lambda d: d["forecasts"][0].update(source="worldsim"), "is unknown: row dropped"),
        (lambda d: d["forecasts"][0].update(forecast=1.5), "outside [0, 1]"),
        (lambda d: d["forecasts"].pop(0), "is not answered: ForecastBench imputes 0.5"),
        (
            lambda d: next(f for f in d["forecasts"] if f["resolution_date"]).update(
                resolution_date="2025-11-03"
            ),
            "is not the due date 2025-10-26 plus a horizon",
        ),
        (
            lambda d: d["forecasts"].append(
                next(f for f in d["forecasts"] if f["resolution_date"])
            ),
            "the reader refuses the whole file",
        ),
        (lambda d: d["forecasts"][0].update(id=7994), "is not text"),
        # the resolver matches a row to its resolution on id, source, direction and due date
        (
            lambda d: next(f for f in d["forecasts"] if not f["resolution_date"]).update(
                direction="up"
            ),
            "direction 'up' on a single question, which has none",
        ),
        (
            lambda d: next(f for f in d["forecasts"] if f["resolution_date"]).update(
                direction="up"
            ),
            "direction 'up' on a single question, which has none",
        ),
        (
            lambda d: d["forecasts"][0].update(direction=[1]),
            "direction [1] on a single question, which has none",
        ),
        # pandas' range check fails on a text cell, and with it the whole file
        (lambda d: d["forecasts"][0].update(forecast="0.97992"), "and on the whole file"),
        (lambda d: d["forecasts"][0].update(forecast=True), "the reader keeps it as 1"),
        (lambda d: d.update(question_set="2025-10-26-human.json"), "against 2025-10-26-human"),
        # six markets unanswered: more than 5% of its markets (and of the round at the first date)
        (
            lambda d: d.update(
                forecasts=[f for f in d["forecasts"] if f["resolution_date"]]
                + [f for f in d["forecasts"] if not f["resolution_date"]][6:]
            ),
            "of the round's market questions imputed",
        ),
        # four data-set questions unanswered at the first date only: under 1% of the round's
        # rows, but 4 of the 57 rows of that date once it resolves, when the leaderboard counts them
        (
            lambda d: _drop_first_date(d, 4),
            "7.0% of the round's data-set rows imputed once 2025-11-02 has resolved",
        ),
    ],
)
def test_the_check_names_what_forecastbenchs_reader_would_drop(
    round_study: dict[str, Path], change: Any, says: str, tmp_path: Path
) -> None:
    out, _ = _export(round_study)
    changed = _rewritten(out, change, tmp_path)
    checked = check_forecast_file(changed, LLM)
    assert not checked.ok
    assert any(says in p for p in checked.problems), checked.problems
    done = invoke("export", "--check", changed, "--question-set", LLM)
    assert done.code == 1 and says in done.out


def test_the_check_counts_every_problem_it_lists_and_those_it_leaves_out(
    round_study: dict[str, Path], tmp_path: Path
) -> None:
    out, _ = _export(round_study)
    changed = _rewritten(out, lambda d: d.update(forecasts=d["forecasts"][:-30]), tmp_path)
    checked = check_forecast_file(changed, LLM)
    listed = [p for p in checked.problems if "is not answered" in p]
    assert (len(listed), checked.imputed) == (20, 30)
    assert "... and 10 more questions not answered" in checked.problems
    others = len(checked.problems) - 21  # besides the unanswered ones: the cut-off lines
    done = invoke("export", "--check", changed, "--question-set", LLM)
    assert done.code == 1 and done.out.splitlines()[-1] == f"{30 + others} problem(s)"


@pytest.mark.parametrize("spelled", ["2025-10-26-llm", "2025-10-26", "2025-10-26-llm.json "])
def test_a_question_set_spelled_as_the_resolver_reads_it_checks_clean(
    round_study: dict[str, Path], spelled: str, tmp_path: Path
) -> None:
    """The resolver reads the first ten characters and whether the name says "human": any
    spelling that gives the same set is the same round."""
    out, _ = _export(round_study)
    changed = _rewritten(out, lambda d: d.update(question_set=spelled), tmp_path)
    assert check_forecast_file(changed, LLM).problems == ()


def test_score_forecastbench_prints_the_leaderboard_figures_beside_its_baselines(
    round_study: dict[str, Path],
) -> None:
    report = round_study["root"] / "fb.json"
    done = invoke(
        "score",
        round_study["study"],
        "--labels",
        round_study["labels"],
        "--forecastbench",
        LLM,
        "--json",
        report,
    )
    assert done.code == 0, done.err
    for words in ("dataset (n)", "market (n)", "overall", "Always 0.5", "Imputed Forecaster"):
        assert words in done.out
    doc = json.loads(report.read_text(encoding="utf-8"))["forecastbench"]
    by = {s["method"]: s for s in doc["scores"]}
    direct = by["direct"]
    # the offline direct forecast of a market card is its freeze value: on the market rows it
    # scores exactly as ForecastBench's imputed forecaster (the market's value)
    imputed = by["Imputed Forecaster (ForecastBench, freeze values)"]
    assert direct["market_resolved"] == imputed["market_resolved"]
    assert direct["market"] == imputed["market"]
    assert direct["overall"] == pytest.approx((direct["dataset"] + direct["market"]) / 2)
    labels = {p.stem: yaml.safe_load(p.read_text()) for p in round_study["labels"].glob("*.yaml")}
    open_markets = [v for v in labels.values() if v["outcome"] == "provisional"]
    resolved_markets = [
        k
        for k, v in labels.items()
        if v["outcome"] != "provisional" and k.split("-")[0] in MARKET_SOURCES
    ]
    assert direct["n_market"] == len(open_markets) + len(resolved_markets)
    assert direct["n_market_resolved"] == len(resolved_markets)
    # data-set rows the study did not forecast are imputed 0.5, as ForecastBench imputes them
    dataset_labels = [k for k in labels if k.split("-")[0] not in MARKET_SOURCES]
    not_studied = [k for k in dataset_labels if not k.endswith("2025-11-02")]
    assert direct["imputed"] == len(not_studied) > 0
    # every market is studied, most data-set rows are not: the leaderboard would leave it out
    assert direct["imputed_market"] == 0 and direct["imputed_dataset"] == len(not_studied)
    assert direct["over_imputed_cutoff"] == ["round", "dataset"]
    dataset_pct = 100 * len(not_studied) / direct["n_dataset"]
    assert f"direct: over the cutoff (round {direct['imputed_pct']:.1f}%, dataset " in done.out
    assert f"dataset {dataset_pct:.1f}% imputed): the leaderboard leaves it out" in done.out
    always = by["Always 0.5 (ForecastBench)"]
    assert always["market_resolved"] == pytest.approx(0.25)
    assert always["accuracy"] is None and always["n_decided"] == 0


def test_forecastbench_accuracy_counts_a_half_as_neither_right_nor_wrong(
    round_study: dict[str, Path],
) -> None:
    """Under --forecastbench a forecast of exactly 0.5 is neither right nor wrong: left out of
    accuracy, where DESIGN's ŷ = [p ≥ 0.5] of the plain score counts it as "yes"."""
    labels = load_labels(round_study["labels"])
    resolved = sorted(
        k for k, e in labels.entries.items() if not e.label.provisional and "-2025-11-02" in k
    )[:4]
    outcomes = {k: labels.entries[k].label.outcome for k in resolved}
    forecasts = {resolved[0]: 0.5, resolved[1]: 0.5}
    forecasts |= {k: 0.9 if outcomes[k] == "yes" else 0.1 for k in resolved[2:]}
    rows = [
        PredictionRow(card_id=k, method="m", kind="binary", p_yes=p, p_options=None, source="t")
        for k, p in forecasts.items()
    ]
    (m, *_) = score_round(LLM, labels, rows).scores
    assert (m.method, m.n_decided, m.accuracy) == ("m", 2, 1.0)
    plain = [binary_scores(0.5, 1 if outcomes[k] == "yes" else 0).correct for k in resolved[:2]]
    assert plain == [outcomes[k] == "yes" for k in resolved[:2]]


def test_export_without_its_inputs_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    for args, flag in (
        (("export", "--method", "direct", "-o", tmp_path / "x.json"), "STUDY_DIR"),
        (("export", "--check", tmp_path / "x.json"), "--question-set"),
    ):
        done = invoke(*args)
        assert done.code == 2 and flag in done.err
        assert len(done.err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_latest_llm_read_as_text_exports_and_checks_as_the_set_it_names(
    round_study: dict[str, Path], tmp_path: Path
) -> None:
    """A pointer file (ForecastBench's latest-llm.json fetched as text) beside the set stands
    for it in export and export --check: the same submission, checked the same way."""
    (tmp_path / LLM.name).write_bytes(LLM.read_bytes())
    pointer = tmp_path / "latest-llm.json"
    pointer.write_text(LLM.name, encoding="utf-8")
    direct, _ = _export(round_study, "direct.json")
    pointed, _ = _export(round_study, "pointed.json", question_set=pointer)
    assert json.loads(pointed.read_text(encoding="utf-8")) == json.loads(
        direct.read_text(encoding="utf-8")
    )
    checked = invoke("export", "--check", pointed, "--question-set", pointer)
    assert checked.code == 0, checked.out
