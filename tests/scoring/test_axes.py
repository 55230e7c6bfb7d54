"""``worldsim score --hindsight``: the three axes on traces of real runs of the demo cards.

Expected KER and source precision are computed here with :mod:`worldsim.scoring.hindsight` on
the same trace files and the graphs as they are on disk at test time, so the tests follow edits
to the demo cards and graphs instead of pinning numbers.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.scoring.conftest import Runner, write_csv
from tests.support import ROOT
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.hindsight import (
    extract_forecast,
    key_event_recall,
    load_hindsight,
    source_precision,
    trace_records,
)
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult

SCENARIOS = ROOT / "scenarios"
LABELS = SCENARIOS / "labels"
HINDSIGHT = SCENARIOS / "hindsight"
REPLICATED = "merger-review"  # run with two seeds, to exercise replicate averaging


def _run(card: Path, seed: int, out: Path) -> RunResult:
    config = RunConfig(card=load_card(card), policy=load_policy("branching"), seed=seed)

    async def go() -> RunResult:
        return await run_card(config, out, fsync=False)

    return anyio.run(go)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """One branching trace of every demo card, two for :data:`REPLICATED`; by card id."""
    out = tmp_path_factory.mktemp("traces")
    found: dict[str, list[Path]] = {}
    for card in sorted(SCENARIOS.glob("*.yaml")):
        seeds = (0, 1) if card.stem == REPLICATED else (0,)
        for seed in seeds:
            result = _run(card, seed, out)
            found.setdefault(result.card_id, []).append(result.trace)
    return found


@pytest.fixture(scope="module")
def trace_dir(traces: dict[str, list[Path]]) -> Path:
    return next(iter(traces.values()))[0].parent


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return math.fsum(known) / len(known) if known else None


def _direct(
    trace_files: Sequence[Path], graph_path: Path, window: float | None = 7.0
) -> dict[str, float | None]:
    """KER, mass-weighted recall and SrcP (worldsim.scoring.hindsight), averaged over replicates."""
    graph = load_hindsight(graph_path)
    kers: list[float | None] = []
    masses: list[float | None] = []
    precisions: list[float | None] = []
    for path in trace_files:
        records = trace_records(path)
        report = key_event_recall(graph, extract_forecast(records).events, date_window_days=window)
        kers.append(report.ker)
        masses.append(report.mass_weighted_recall)
        precisions.append(source_precision(records, graph).precision)
    return {"ker": _mean(kers), "mwr": _mean(masses), "srcp": _mean(precisions)}


def _score(run: Runner, tmp_path: Path, *inputs: Path | str, hindsight: Path = HINDSIGHT) -> Any:
    out = tmp_path / "score.json"
    result = run("score", *inputs, "--labels", LABELS, "--hindsight", hindsight, "--json", out)
    assert result.code == 0, result.err
    return json.loads(out.read_text()), result


def _close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (
        a is not None and b is not None and math.isclose(a, b, abs_tol=1e-12)
    )


def test_axes_per_card_equal_direct_hindsight_scores(
    run: Runner, tmp_path: Path, traces: dict[str, list[Path]], trace_dir: Path
) -> None:
    doc, _ = _score(run, tmp_path, trace_dir)
    axes = doc["axes"]
    assert axes is not None and axes["date_window_days"] == 7.0
    per_card = {(r["card_id"], r["method"]): r for r in doc["per_card"]}
    cards = {(c["card_id"], c["method"]): c for c in axes["cards"]}
    checked = 0
    for card_id, files in traces.items():
        graph_path = HINDSIGHT / f"{card_id}.json"
        row, detail = per_card[(card_id, "branching")], cards[(card_id, "branching")]
        assert row["n_replicates"] == detail["n_traces"] == len(files)
        if not graph_path.is_file():
            assert row["ker"] is None and row["srcp"] is None
            assert card_id in axes["coverage"]["cards_without_graph"]
            continue
        want = _direct(files, graph_path)
        assert _close(row["ker"], want["ker"]), card_id
        assert _close(row["srcp"], want["srcp"]), card_id
        assert _close(detail["ker"], want["ker"]) and _close(detail["srcp"], want["srcp"])
        assert _close(detail["mass_weighted_recall"], want["mwr"]), card_id
        assert sorted(t["source"] for t in detail["traces"]) == sorted(str(f) for f in files)
        checked += 1
    assert checked > 0, "no demo card has a hindsight graph"


def test_method_axes_are_the_means_of_the_per_card_rows(
    run: Runner, tmp_path: Path, trace_dir: Path
) -> None:
    doc, result = _score(run, tmp_path, trace_dir)
    method = doc["axes"]["methods"]["branching"]
    rows = [r for r in doc["per_card"] if r["method"] == "branching"]
    with_graph = set(doc["axes"]["coverage"]["cards_with_graph"])
    scored = [r for r in rows if r["card_id"] in with_graph]
    kers = [r["ker"] for r in scored if r["ker"] is not None]
    precisions = [r["srcp"] for r in scored if r["srcp"] is not None]

    assert method["n"] == doc["methods"]["branching"]["n"] == len(rows)
    assert method["n_hindsight"] == len(scored)
    assert method["outcome"] == {
        k: doc["methods"]["branching"][k] for k in ("accuracy", "brier", "log")
    }
    assert method["reasoning"]["n"] == len(kers)
    assert method["evidence"]["n"] == len(precisions)
    assert _close(method["reasoning"]["ker_mean"], _mean(kers))
    assert _close(method["evidence"]["srcp_mean"], _mean(precisions))

    split = method["by_correctness"]
    assert split["correct"]["n"] + split["incorrect"]["n"] == method["n_hindsight"]
    assert split["correct"]["ker_n"] + split["incorrect"]["ker_n"] == method["reasoning"]["n"]
    assert split["correct"]["srcp_n"] + split["incorrect"]["srcp_n"] == method["evidence"]["n"]
    for name, flag in (("correct", True), ("incorrect", False)):
        group = [r for r in scored if r["correct"] is flag]
        assert split[name]["n"] == len(group)
        assert _close(split[name]["ker_mean"], _mean([r["ker"] for r in group]))
        assert _close(split[name]["srcp_mean"], _mean([r["srcp"] for r in group]))

    # Exploratory: the prereg format cannot name these statistics.
    for name in ("ker", "srcp", "mass_weighted_recall", "ker_by_correctness"):
        assert f"{name}:branching" in doc["exploratory"]
    assert "Three axes" in result.out and "hindsight: graphs for" in result.out


def test_card_without_a_graph_is_listed_in_the_coverage(
    run: Runner, tmp_path: Path, traces: dict[str, list[Path]], trace_dir: Path
) -> None:
    graphs = tmp_path / "hindsight"
    shutil.copytree(HINDSIGHT, graphs)
    with_graph = sorted(c for c in traces if (graphs / f"{c}.json").is_file())
    assert with_graph, "no demo card has a hindsight graph"
    dropped = with_graph[0]
    (graphs / f"{dropped}.json").unlink()
    expected = sorted(c for c in traces if not (graphs / f"{c}.json").is_file())
    doc, result = _score(run, tmp_path, trace_dir, hindsight=graphs)
    axes = doc["axes"]
    assert axes["coverage"]["cards_without_graph"] == expected
    assert dropped not in axes["coverage"]["cards_with_graph"]
    row = next(r for r in doc["per_card"] if r["card_id"] == dropped)
    assert row["ker"] is None and row["srcp"] is None
    assert f"without a graph: {','.join(expected)}" in result.out
    # Still scored on the outcome axis, and left out of the axes' own counts.
    method = axes["methods"]["branching"]
    assert method["n"] == len(traces)
    assert method["n_hindsight"] == len(traces) - len(expected)


def test_table_rows_have_no_ker_or_srcp(run: Runner, tmp_path: Path, trace_dir: Path) -> None:
    table = write_csv(
        tmp_path / "analyst.csv", ["card_id", "method", "p_yes"], [[REPLICATED, "analyst", 0.7]]
    )
    doc, _ = _score(run, tmp_path, trace_dir, table)
    row = next(r for r in doc["per_card"] if r["method"] == "analyst")
    assert row["ker"] is None and row["srcp"] is None
    analyst = doc["axes"]["methods"]["analyst"]
    assert analyst["n_hindsight"] == 0 and analyst["reasoning"]["n"] == 0
    assert analyst["evidence"] == {"srcp_mean": None, "n": 0}
    if (HINDSIGHT / f"{REPLICATED}.json").is_file():
        assert {"card_id": REPLICATED, "method": "analyst"} in doc["axes"]["coverage"][
            "forecasts_without_trace"
        ]
    assert not any(n.endswith(":analyst") and n.startswith("ker") for n in doc["exploratory"])


def test_broken_graph_is_an_error_naming_the_file(
    run: Runner, tmp_path: Path, trace_dir: Path
) -> None:
    graphs = tmp_path / "hindsight"
    shutil.copytree(HINDSIGHT, graphs)
    victim = graphs / f"{REPLICATED}.json"
    victim.write_text(victim.read_text()[:-40])
    out = tmp_path / "score.json"
    result = run("score", trace_dir, "--labels", LABELS, "--hindsight", graphs, "--json", out)
    assert result.code == 2
    assert str(victim) in result.err and "malformed JSON" in result.err
    assert not out.exists()


def test_structural_error_refuses_and_quality_warnings_are_reported(
    run: Runner, tmp_path: Path, trace_dir: Path
) -> None:
    graphs = tmp_path / "hindsight"
    shutil.copytree(HINDSIGHT, graphs)
    victim = graphs / f"{REPLICATED}.json"
    data = json.loads(victim.read_text())
    first, second = data["events"][0]["id"], data["events"][1]["id"]
    cyclic = {
        **data,
        "edges": [
            {
                "source": first,
                "target": second,
                "relation": "causes",
                "strength": 0.8,
                "confidence": 0.9,
            },
            {
                "source": second,
                "target": first,
                "relation": "causes",
                "strength": 0.8,
                "confidence": 0.9,
            },
        ],
    }
    victim.write_text(json.dumps(cyclic))
    result = run("score", trace_dir, "--labels", LABELS, "--hindsight", graphs)
    assert result.code == 2 and str(victim) in result.err and "cycle" in result.err

    # Too few events is a quality warning: reported, not blocking.
    thin = {**data, "events": data["events"][:4], "edges": [], "impacts": []}
    thin["events"] = [{**ev, "is_outcome": False} for ev in thin["events"]]
    victim.write_text(json.dumps(thin))
    doc, outcome = _score(run, tmp_path, trace_dir, hindsight=graphs)
    graph = next(g for g in doc["axes"]["graphs"] if g["card_id"] == REPLICATED)
    assert any("fewer than" in w for w in graph["warnings"])
    assert str(victim) in outcome.err and "warning" in outcome.err
    assert "graph quality warning" in outcome.out


def test_hindsight_must_be_a_folder(run: Runner, tmp_path: Path, trace_dir: Path) -> None:
    graph = next(HINDSIGHT.glob("*.json"))
    result = run("score", trace_dir, "--labels", LABELS, "--hindsight", graph)
    assert result.code == 2 and str(graph) in result.err and "folder" in result.err


def test_graph_for_another_card_is_refused(run: Runner, tmp_path: Path, trace_dir: Path) -> None:
    graphs = tmp_path / "hindsight"
    shutil.copytree(HINDSIGHT, graphs)
    victim = graphs / f"{REPLICATED}.json"
    data = json.loads(victim.read_text())
    victim.write_text(json.dumps({**data, "card_id": "some-other-card"}))
    result = run("score", trace_dir, "--labels", LABELS, "--hindsight", graphs)
    assert result.code == 2 and str(victim) in result.err and "some-other-card" in result.err


def test_date_window_option(
    run: Runner, tmp_path: Path, traces: dict[str, list[Path]], trace_dir: Path
) -> None:
    out = tmp_path / "score.json"
    result = run(
        "score",
        trace_dir,
        "--labels",
        LABELS,
        "--hindsight",
        HINDSIGHT,
        "--date-window",
        "none",
        "--json",
        out,
    )
    assert result.code == 0, result.err
    doc = json.loads(out.read_text())
    assert doc["axes"]["date_window_days"] is None
    for card in doc["axes"]["cards"]:
        if card["graph"] is None:
            continue
        want = _direct(traces[card["card_id"]], Path(card["graph"]), window=None)
        assert _close(card["ker"], want["ker"])
    bad = run(
        "score", trace_dir, "--labels", LABELS, "--hindsight", HINDSIGHT, "--date-window", "-1"
    )
    assert bad.code == 2 and "--date-window" in bad.err
    alone = run("score", trace_dir, "--labels", LABELS, "--date-window", "3")
    assert alone.code == 2 and "--hindsight" in alone.err


def test_tables_gain_axes_columns_only_with_hindsight(
    run: Runner, tmp_path: Path, trace_dir: Path
) -> None:
    csv_path, md_path = tmp_path / "cards.csv", tmp_path / "cards.md"
    result = run(
        "score",
        trace_dir,
        "--labels",
        LABELS,
        "--hindsight",
        HINDSIGHT,
        "--csv",
        csv_path,
        "--markdown",
        md_path,
    )
    assert result.code == 0, result.err
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[-2:] == ["ker", "srcp"]
    assert md_path.read_text().splitlines()[0].endswith("| ker | srcp |")

    plain_json = tmp_path / "plain.json"
    plain = run("score", trace_dir, "--labels", LABELS, "--csv", csv_path, "--json", plain_json)
    assert plain.code == 0, plain.err
    with csv_path.open() as fh:
        assert "ker" not in next(csv.reader(fh))
    doc = json.loads(plain_json.read_text())
    assert doc["axes"] is None and "ker" not in doc["per_card"][0]
    assert "Three axes" not in plain.out
