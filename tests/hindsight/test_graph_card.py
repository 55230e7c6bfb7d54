"""A hindsight graph is scored only against a run of its own card: `hindsight ker`, `sources`,
`pressure` and `view --hindsight` refuse another card's graph as `score --hindsight` does, by
the same check, and `hindsight ker` says KER is not defined for a direct forecast."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import DEMO_CARD, ROOT, Outcome, invoke
from worldsim.domain.errors import CardError
from worldsim.scoring.axes import load_graphs
from worldsim.scoring.hindsight.graph import check_graph_card, load_hindsight

GRAPHS = ROOT / "scenarios" / "hindsight"
OTHER = GRAPHS / "election-runoff.json"  # the trace is a run of merger-review
REFUSED = (
    f"error: {OTHER}: field 'card_id': graph is for card 'election-runoff', not 'merger-review'"
)


def _refused(done: Outcome) -> None:
    assert done.code == 2, (done.out, done.err)
    assert done.err.strip() == REFUSED and "Traceback" not in done.err
    assert "KER" not in done.out and "precision" not in done.out


@pytest.mark.parametrize("command", ["ker", "sources"])
def test_hindsight_scores_refuse_another_cards_graph(engine_trace: Path, command: str) -> None:
    _refused(invoke("hindsight", command, engine_trace, "--hindsight", OTHER))
    own = invoke("hindsight", command, engine_trace, "--hindsight", GRAPHS / "merger-review.json")
    assert own.code == 0, own.err


def test_ker_refuses_another_cards_graph_for_a_forecast_graph_file(
    engine_trace: Path, tmp_path: Path
) -> None:
    written = tmp_path / "forecast.json"
    assert invoke("hindsight", "forecast-graph", engine_trace, "-o", written).code == 0
    _refused(invoke("hindsight", "ker", written, "--hindsight", OTHER))


def test_pressure_refuses_another_cards_graph_and_writes_nothing(
    engine_trace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "pressure"
    _refused(invoke("hindsight", "pressure", engine_trace, "--hindsight", OTHER, "-o", out))
    assert not out.exists()


def test_view_refuses_another_cards_graph_and_writes_nothing(
    engine_trace: Path, tmp_path: Path
) -> None:
    page = tmp_path / "run.html"
    _refused(invoke("view", engine_trace, "--hindsight", OTHER, "-o", page))
    assert list(tmp_path.iterdir()) == []
    shown = invoke("view", engine_trace, "--hindsight", GRAPHS / "merger-review.json", "-o", page)
    assert shown.code == 0 and page.is_file()


def test_score_refuses_it_with_the_same_line(tmp_path: Path) -> None:
    folder = tmp_path / "graphs"
    folder.mkdir()
    shutil.copy(OTHER, folder / "merger-review.json")
    with pytest.raises(CardError) as scored:
        load_graphs(folder, ["merger-review"])
    with pytest.raises(CardError) as checked:
        check_graph_card(load_hindsight(OTHER), "merger-review", file=folder / "merger-review.json")
    assert str(scored.value) == str(checked.value)
    assert (scored.value.field, scored.value.file) == (
        "card_id",
        str(folder / "merger-review.json"),
    )


def test_a_graph_or_forecast_naming_no_card_is_not_checked() -> None:
    graph = load_hindsight(OTHER)
    check_graph_card(graph, None, file=OTHER)
    check_graph_card(graph.model_copy(update={"card_id": None}), "merger-review", file=OTHER)
    check_graph_card(graph, "election-runoff", file=OTHER)


def test_ker_of_a_direct_forecast_is_not_defined(tmp_path: Path) -> None:
    made = invoke("forecast", DEMO_CARD, "--model", "offline", "--out", tmp_path)
    assert made.code == 0, made.err
    (trace,) = tmp_path.glob("*.jsonl")
    ker = invoke("hindsight", "ker", trace, "--hindsight", GRAPHS / "merger-review.json")
    assert ker.code == 2 and "Traceback" not in ker.err
    assert ker.err.strip() == (
        f"error: {trace}: this run is a direct forecast (one model call): it simulates no "
        "events, so KER is not defined"
    )
    assert "KER" not in ker.out
