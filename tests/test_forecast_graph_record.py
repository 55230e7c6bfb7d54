"""A run whose agent condition builds the forecast-time causal graph records it in its trace (its
digest and sizes); KER is read from the graph its records give, checked against that digest, and
is not defined for a run whose condition builds none. (The record is derived from the others, so
the canonical hash leaves it out.)"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD, ROOT, invoke
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.contracts import lineage
from worldsim.domain.errors import ConfigError, TraceError, TraceIncomplete
from worldsim.domain.policy import load_policy
from worldsim.scoring.hindsight.forecast import forecast_graph_json_of, forecast_graph_of
from worldsim.sim.resuming import resume_run
from worldsim.sim.session import run_card
from worldsim.trace.forecast import (
    FORECAST_TYPES,
    ForecastRecords,
    RecordView,
    extract_forecast,
    forecast_json,
    forecast_record,
    record_views,
)
from worldsim.trace.reader import read_trace
from worldsim.trace.records import ForecastGraph, ForecastGraphData
from worldsim.trace.verify import stream_records, trace_records
from worldsim.trace.writer import SEALED_TYPES, TraceWriter


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
    record = ForecastGraphData.model_validate(trace.first("forecast_graph").fields)
    before = trace.effective[: types.index("forecast_graph")]
    graph = extract_forecast(record_views(before))
    assert graph.events  # the demo card's timelines make events
    assert forecast_json(record_views(before)) == graph.model_dump(mode="json")
    assert record.digest == graph.digest()
    assert (record.event_count, record.link_count) == (len(graph.events), len(graph.links))
    assert forecast_graph_of(trace_records(trace.path)) == graph
    assert forecast_graph_json_of(trace_records(trace.path)) == graph.model_dump(mode="json")


@pytest.mark.parametrize("condition", ["vanilla", "search"])
def test_a_condition_without_a_graph_has_no_record_and_no_ker(
    tmp_path: Path, condition: str
) -> None:
    path = _run(tmp_path, condition)
    trace = read_trace(path)
    assert all(line.type != "forecast_graph" for line in trace.effective)
    assert forecast_graph_of(trace_records(path)) is None
    assert forecast_graph_json_of(trace_records(path)) is None
    graph = ROOT / "scenarios" / "hindsight" / "merger-review.json"
    ker = invoke("hindsight", "ker", path, "--hindsight", graph)
    assert ker.code == 2 and "KER is not defined" in ker.err


def _rewritten(source: Path, target: Path, graph_data: dict[str, object]) -> Path:
    """``source``'s records written again by the writer into ``target`` (a sound trace of its
    own), its ``forecast_graph`` record's data replaced by ``graph_data``."""
    records = []
    for line in read_trace(source).lines:
        data = dict(graph_data) if line.type == "forecast_graph" else dict(line.fields)
        if line.type in SEALED_TYPES:
            data["seal"] = ""  # the writer seals terminal records again
        records.append((line.type, line.tl, line.tick, data))

    async def write() -> None:
        writer = await TraceWriter.create(target, "rewritten0000001", fsync=False)
        try:
            for type_, tl, tick, data in records:
                await writer.emit(type_, data, tl=tl, tick=tick)
        finally:
            await writer.aclose()

    anyio.run(write)
    return target


def test_a_graph_the_records_give_otherwise_than_recorded_is_refused(tmp_path: Path) -> None:
    source = _run(tmp_path, "search_graph")
    record = read_trace(source).first("forecast_graph").fields
    bad = _rewritten(source, tmp_path / "bad.jsonl", {**record, "digest": "0" * 64})
    views = record_views(read_trace(bad).effective)  # read without the gate
    with pytest.raises(ConfigError) as caught:
        forecast_graph_of(views, file=bad)
    assert caught.value.field == "forecast_graph.digest"
    assert "digest is not the one the run recorded" in caught.value.message
    with pytest.raises(ConfigError, match="digest is not the one the run recorded"):
        forecast_graph_json_of(views, file=bad)
    # through the gate, verify refuses the trace itself, and so does every reader
    with pytest.raises(TraceError, match="digest is not the recorded one") as refused:
        trace_records(bad)
    assert invoke("verify", bad).code == 1
    shown = invoke("view", bad, "-o", tmp_path / "bad.html")
    assert shown.code == 1 and str(refused.value) in shown.err
    assert not (tmp_path / "bad.html").exists()
    graph = ROOT / "scenarios" / "hindsight" / "merger-review.json"
    ker = invoke("hindsight", "ker", bad, "--hindsight", graph)
    assert ker.code == 1 and str(refused.value) in ker.err and "Traceback" not in ker.err


@pytest.fixture(scope="module")
def graph_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, ForecastGraph, int]:
    """An uninterrupted graph-condition run: its bytes, its graph, where its world ends."""
    path = _run(tmp_path_factory.mktemp("graph"), "search_graph")
    trace = read_trace(path)
    init = trace.first("world_initialized")
    assert init is not None
    after_init = len(b"".join(line.raw + b"\n" for line in trace.lines[: init.number]))
    graph = forecast_graph_of(trace_records(path))
    assert graph is not None
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
    record = ForecastGraphData.model_validate(trace.first("forecast_graph").fields)
    types = [line.type for line in trace.effective]
    graph = extract_forecast(record_views(trace.effective[: types.index("forecast_graph")]))
    assert record.digest == graph.digest() == whole.digest()
    assert graph == whole


def test_streamed_records_of_some_types_are_those_of_the_whole_list(tmp_path: Path) -> None:
    path = _run(tmp_path, "search_graph")
    whole = trace_records(path)
    some = list(stream_records(path, {"retrievals", "proposals"}))
    assert some == [r for r in whole if r.type in {"retrievals", "proposals"}]
    assert {r.type for r in some} == {"retrievals", "proposals"}
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    records = stream_records(empty)  # nothing is read until the stream is
    with pytest.raises(TraceError, match="trace is empty"):  # as verify refuses it
        list(records)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(path.read_bytes()[:100])
    with pytest.raises(TraceIncomplete, match="no result: cut off in its first record"):
        list(stream_records(torn))


dates = st.sampled_from(
    ["2026-03-01T00:00:00Z", "2026-03-01T10:30:00.250000+02:00", "2026-03-01", "not a date", 7]
)


@settings(max_examples=150, deadline=None)
@given(
    started=st.fixed_dictionaries({"id": st.sampled_from(["c1", 3]), "as_of": dates}),
    ticks=st.lists(
        st.tuples(
            st.sampled_from(["t0", "t0.1", "t0.10", "t0.2", "t0.01"]),  # t0.01: t0.1's lineage
            st.integers(0, 3),
            dates,
            st.lists(st.sampled_from(["e1", "e2"]), max_size=2),
            st.lists(
                st.tuples(
                    st.sampled_from(["a", "b"]),
                    st.sampled_from([0, 1, True]),
                    st.lists(st.sampled_from(["d1", "d2", "d1"]), max_size=3),
                    st.booleans(),
                ),
                max_size=3,
            ),
            st.none() | st.floats(0.0, 1.0),
            st.none() | st.sampled_from(["h1", "h2"]),
        ),
        max_size=6,
    ),
)
def test_the_graphs_json_form_is_made_without_its_objects(
    started: dict[str, object],
    ticks: list[tuple],  # type: ignore[type-arg]
) -> None:
    """What a run's end digests (the JSON form made from the records) is what readers digest
    (the graph's objects, dumped), for any records, dates in any form and missing values."""
    records = [RecordView("run_started", None, None, {"card": started}, run="r1")]
    for tl, tick, date, obs, moves, mass, fork in ticks:
        observations = [{"id": o, "title": o.upper(), "description": "d"} for o in obs]
        records.append(
            RecordView("tick_started", tl, tick, {"date": date, "observations": observations})
        )
        items = [
            {"agent": agent, "index": index, "summary": f"{agent} moves", "cites": cites}
            for agent, index, cites, _ in moves
        ]
        records.append(RecordView("proposals", tl, tick, {"proposals": items}))
        accepted = [{"agent": a, "index": i} for a, i, _, ok in moves if ok]
        records.append(RecordView("review", tl, tick, {"accepted": accepted}))
        if fork is not None:
            fork_data = {"child": f"{tl}.9", "candidate": {"hypothesis": fork}}
            records.append(RecordView("fork", tl, tick, fork_data))
        if mass is not None:
            records.append(RecordView("tick_committed", tl, tick, {"mass": mass}))
    graph = extract_forecast(records)
    assert forecast_json(records) == graph.model_dump(mode="json")
    assert ForecastGraphData.of(forecast_json(records)).digest == graph.digest()
    # what a run's end writes: the same record, hashed a chunk at a time
    assert forecast_record(records) == ForecastGraphData.of(forecast_json(records))
    # and the records as a run keeps them (proposals and accepted references as columns)
    kept = ForecastRecords(run="r1")
    for r in records:
        kept.keep(r.type, r.tl, r.tick, r.data)
    assert forecast_json(kept.views()) == forecast_json(
        [r for r in records if r.type in FORECAST_TYPES]
    )
    # links come in the canonical order of their proposals: tick, lineage, agent, index
    order = []
    for link in forecast_json(records)["links"]:
        proposal = link["source"] if link["relation"] == "cites" else link["target"]
        tl, tick, agent, index = proposal.split("/")
        order.append((int(tick), lineage(tl), agent, int(index)))
    assert order == sorted(order)


@settings(max_examples=150, deadline=None)
@given(
    tl=st.sampled_from(["t0", "t0.1"]),
    observations=st.lists(st.sampled_from(["e1", 'e"2', "e{3}"]), max_size=2, unique=True),
    moves=st.lists(
        st.tuples(
            st.sampled_from(["a", "b{1}", "c}", 'd"', "é"]),
            st.sampled_from(["a moves", 'says "no" \\ twice', "ünï {0} }{", "tab\there", ""]),
            st.lists(st.sampled_from(["d1", "d{2}", 'd"3', "d1"]), max_size=3),
            st.sampled_from([list, tuple]),
        ),
        max_size=6,
    ),
)
def test_a_tick_accepted_whole_is_digested_as_its_records_are(
    tl: str,
    observations: list[str],
    moves: list[tuple],  # type: ignore[type-arg]
) -> None:
    """A timeline's tick whose proposals are all accepted in canonical order (the offline
    model's) is made a group at a time from its columns: its events and links hash as those of
    the same records read one by one, whatever its ids, summaries and documents hold
    (quotes, backslashes, braces, control characters, non-ASCII)."""
    moves = sorted({agent: m for agent, *m in moves}.items())
    records = [
        RecordView("run_started", None, None, {"card": {"id": "c1", "as_of": "2026-03-01"}}),
        RecordView(
            "tick_started",
            tl,
            1,
            {
                "date": "2026-03-02",
                "observations": [{"id": o, "title": o, "description": ""} for o in observations],
            },
        ),
        RecordView(
            "proposals",
            tl,
            1,
            {
                "proposals": [
                    {"agent": agent, "index": 0, "summary": summary, "cites": kind(cites)}
                    for agent, (summary, cites, kind) in moves
                ]
            },
        ),
        RecordView("review", tl, 1, {"accepted": [{"agent": a, "index": 0} for a, _ in moves]}),
        RecordView("tick_committed", tl, 1, {"mass": 0.5}),
    ]
    kept = ForecastRecords(run=None)
    for r in records:
        kept.keep(r.type, r.tl, r.tick, r.data)
    assert forecast_record(kept.views()) == forecast_record(records)
    assert forecast_record(records) == ForecastGraphData.of(extract_forecast(records).model_dump())
