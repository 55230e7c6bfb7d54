"""docs/construction.md, step by step on the shipped corpus: articles in, cards out, the
labels shipped beside them, hindsight graphs built or flagged by the gates, a sheet applied,
and a scored study on the cards in which the flagged graphs are left out."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.support import ROOT, invoke
from worldsim.build.annotate import CHECKS
from worldsim.scoring.hindsight.graph import load_hindsight

CORPUS = ROOT / "scenarios" / "corpus"
LABELS = CORPUS / "labels"
BUILT = "2027-02-02-larkport-harbour-authority-approve-new-ferry-toll"
FLAGGED = "2027-02-06-eastvale-borough-cabinet-decide-library-extension"


def test_the_construction_walkthrough_runs_offline_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "corpus.sqlite"
    assert invoke("gateway", "ingest", CORPUS / "articles.jsonl", "--db", db).code == 0
    cards = tmp_path / "cards"
    made = invoke(
        "build", "questions", "--db", db, "--markets", CORPUS / "markets.jsonl", "-o", cards
    )
    assert made.code == 0, made.err
    ids = sorted(p.stem for p in cards.glob("*.yaml"))
    assert ids == sorted(p.stem for p in LABELS.glob("*.yaml"))  # the shipped labels fit
    graphs = tmp_path / "hindsight"
    for card_id in ids:
        done = invoke(
            "build",
            "hindsight",
            cards / f"{card_id}.yaml",
            "--label",
            LABELS,
            "--db",
            db,
            "-o",
            graphs / f"{card_id}.json",
        )
        assert done.code == 0, done.err
    built = load_hindsight(graphs / f"{BUILT}.json")
    assert built.graph_built and len(built.sources) >= 20
    flagged = load_hindsight(graphs / f"{FLAGGED}.json")
    assert not flagged.graph_built and flagged.failed_gates
    # a person checks the built graph and rejects one event
    sheet = tmp_path / "sheet.csv"
    assert invoke("build", "annotate", graphs / f"{BUILT}.json", "-o", sheet).code == 0
    with sheet.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row.update(dict.fromkeys(CHECKS, "yes"))
    rows[0]["causal_relevance"] = "no"
    with sheet.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    path = graphs / f"{BUILT}.json"
    applied = invoke("build", "apply-annotations", path, sheet, "-o", path)
    assert applied.code == 0, applied.err
    assert load_hindsight(path).graph_built  # 21 events and sources still pass
    # a study on the built cards, scored with the graphs
    manifest = tmp_path / "study.yaml"
    manifest.write_text(
        "name: built-cards\n"
        f"cards: [{cards}/*.yaml]\n"
        "seeds: [0]\n"
        "forecast_dates: [card]\n"
        "methods:\n"
        "  - {label: sim, run: {policy: branching, model: offline, ticks: 2}}\n"
        "  - {label: direct, forecast: {model: offline}}\n",
        encoding="utf-8",
    )
    study = tmp_path / "study"
    ran = invoke("batch", manifest, "--out", study)
    assert ran.code == 0, ran.err
    report = tmp_path / "score.json"
    scored = invoke("score", study, "--labels", LABELS, "--hindsight", graphs, "--json", report)
    assert scored.code == 0, scored.err
    axes = json.loads(report.read_text(encoding="utf-8"))["axes"]
    assert sorted(axes["coverage"]["cards_with_graph"]) == [BUILT, "demo-market-larkport-toll"]
    left_out = {g["card_id"] for g in axes["coverage"]["graphs_not_built"]}
    assert left_out == {FLAGGED, "demo-market-norland-quota"}
    annotated = [g for g in axes["graphs"] if g["annotation"]]
    assert [g["annotation"]["rejected"] for g in annotated] == [1]
