"""A run whose agent condition builds the forecast-time causal graph writes it into its trace;
KER is read from that record, and is not defined for a run whose condition builds none. (The
record is derived from the others, so the canonical hash leaves it out: the demo cards' pins in
tests/test_canonical_pins.py were taken before runs wrote it.)"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD, ROOT, invoke
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.hindsight.forecast import forecast_graph_of, trace_records
from worldsim.sim.session import resume_run, run_card
from worldsim.trace.forecast import extract_forecast, record_views
from worldsim.trace.reader import read_trace
from worldsim.trace.records import ForecastGraph


def _run(tmp_path: Path, condition: str, *, label: str | None = None) -> Path:
    config = RunConfig(
        card=load_card(DEMO_CARD),
        policy=load_policy("branching"),
        seed=3,
        ticks=4,
        condition=condition,
        method=label or condition.replace("_", "-"),
    )
    return anyio.run(lambda: run_card(config, tmp_path, fsync=False)).trace


@pytest.mark.parametrize("condition", ["search_graph", "causal_simulation", "near_resolution"])
def test_a_graph_condition_writes_its_graph_before_the_extraction(
    tmp_path: Path, condition: str
) -> None:
    trace = read_trace(_run(tmp_path, condition))
    types = [line.type for line in trace.effective]
    assert types.count("forecast_graph") == 1
    assert types.index("forecast_graph") == types.index("extraction") - 1
    record = ForecastGraph.model_validate(trace.first("forecast_graph").fields)
    before = trace.effective[: types.index("forecast_graph")]
    assert record == extract_forecast(record_views(before))
    assert record.events  # the demo card's timelines make events
    assert forecast_graph_of(trace_records(trace.path)) == record


@pytest.mark.parametrize("condition", ["vanilla", "search"])
def test_a_condition_without_a_graph_has_no_record_and_no_ker(
    tmp_path: Path, condition: str
) -> None:
    path = _run(tmp_path, condition)
    trace = read_trace(path)
    assert all(line.type != "forecast_graph" for line in trace.effective)
    assert forecast_graph_of(trace_records(path)) is None
    graph = ROOT / "scenarios" / "hindsight" / "merger-review.json"
    ker = invoke("hindsight", "ker", path, "--hindsight", graph)
    assert ker.code == 2 and "KER is not defined" in ker.err


def test_a_trace_from_before_the_record_is_scored_by_deriving_its_graph(tmp_path: Path) -> None:
    path = _run(tmp_path, "search_graph")
    views = [r for r in trace_records(path) if r.type != "forecast_graph"]
    derived = forecast_graph_of(views)
    assert derived is not None
    assert derived == ForecastGraph.model_validate(read_trace(path).first("forecast_graph").fields)


@pytest.fixture(scope="module")
def graph_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, ForecastGraph, int]:
    """An uninterrupted graph-condition run: its bytes, its graph, where its world ends."""
    path = _run(tmp_path_factory.mktemp("graph"), "search_graph")
    trace = read_trace(path)
    init = trace.first("world_initialized")
    assert init is not None
    after_init = len(b"".join(line.raw + b"\n" for line in trace.lines[: init.number]))
    graph = ForecastGraph.model_validate(trace.first("forecast_graph").fields)
    return path.read_bytes(), graph, after_init


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_a_resumed_run_writes_the_graph_of_its_whole_history(
    graph_run: tuple[bytes, ForecastGraph, int], tmp_path: Path, data: st.DataObject
) -> None:
    """Cut anywhere after the world and resumed: the graph covers the records written before
    the resumption (read back from the trace) and after it (kept as written), as the
    uninterrupted run's does."""
    blob, whole, after_init = graph_run
    before_graph = blob.index(b'"type":"forecast_graph"')
    cut = data.draw(st.integers(after_init, before_graph - 2), label="cut")
    path = tmp_path / "cut.jsonl"
    path.write_bytes(blob[:cut])
    anyio.run(lambda: resume_run(path, fsync=False))
    trace = read_trace(path)
    assert trace.first("run_resumed") is not None
    record = ForecastGraph.model_validate(trace.first("forecast_graph").fields)
    types = [line.type for line in trace.effective]
    assert record == extract_forecast(
        record_views(trace.effective[: types.index("forecast_graph")])
    )
    assert record == whole
