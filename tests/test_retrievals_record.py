"""A tick's gateway accesses are one ``retrievals`` record, ordered by agent; a cut run
restores every access before its cut."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import cut_mid_run
from worldsim.domain.jsonbytes import floats_in
from worldsim.gateway.access import Access, Logged, RetrievalRecord, access_json
from worldsim.sim.resume import Cut, restore_point, resume_config
from worldsim.sim.resuming import resume_run
from worldsim.trace.reader import read_trace
from worldsim.trace.records import RetrievalsData, accesses_of
from worldsim.trace.verify import canonical_hash


@pytest.fixture(scope="module")
def recorded(branching_demo_trace: Path) -> Path:
    return branching_demo_trace


def test_one_record_per_timeline_tick_ordered_by_agent(recorded: Path) -> None:
    trace = read_trace(recorded)
    lines = list(trace.of_type("retrievals"))
    places = [(line.tl, line.tick) for line in lines]
    assert len(lines) > 1 and len(set(places)) == len(places)
    assert len({line.tl for line in lines}) > 1, "the branching run traced several timelines"
    for line in lines:
        agents = [a.agent for a in line.data.accesses]
        assert agents == sorted(agents)
        # each agent searches, then opens what the search returned
        first = {}
        for access in line.data.accesses:
            first.setdefault(access.agent, access)
        assert all(a.tool == "search_evidence" for a in first.values())
    # every access is where its record says it is
    for access in trace.accesses():
        assert access.timeline is not None and access.tick is not None
    # and written as access_json writes it: the fields at their defaults left out
    raw = [json.loads(line) for line in recorded.read_bytes().splitlines()]
    written = [a for r in raw if r["type"] == "retrievals" for a in r["data"]["accesses"]]
    tools = collections.Counter(a["tool"] for a in written)
    assert tools["search_evidence"] and tools["open_document"]
    for access in written:
        assert access == access_json(**Access.model_validate(access).model_dump())


def test_every_cited_document_was_retrieved_in_the_record_of_its_tick(recorded: Path) -> None:
    trace = read_trace(recorded)
    received: dict[tuple[str | None, int | None, str], set[str]] = collections.defaultdict(set)
    for access in trace.accesses():
        received[(access.timeline, access.tick, access.agent)].update(access.doc_ids)
    proposals = [p for p in trace.proposals() if p.data.cites]
    assert proposals
    for line in proposals:
        assert set(line.data.cites) <= received[(line.tl, line.tick, line.data.agent)]


def test_a_cut_run_restores_every_access_before_the_cut(recorded: Path, tmp_path: Path) -> None:
    whole = recorded
    full = read_trace(whole)
    path = cut_mid_run(whole, tmp_path / "cut.jsonl")
    trace = read_trace(path)
    point = restore_point(Cut(trace), resume_config(trace))
    assert point.retrievals == trace.accesses() and point.retrievals
    anyio.run(lambda: resume_run(path, fsync=False))
    assert canonical_hash(read_trace(path)) == canonical_hash(full)


CUTOFF = "2027-01-04T00:00:00Z"
optional_text = st.none() | st.text(max_size=6)
logged = st.builds(
    lambda agent, tool, query, doc_id, k, doc_ids, reason: RetrievalRecord.model_validate(
        {
            "agent": agent,
            "tool": tool,
            "query": query,
            "doc_id": doc_id,
            "k": k,
            "doc_ids": doc_ids,
            "refused": reason is not None,
            "reason": reason,
            "timeline": "t0.2",
            "tick": 3,
            "cutoff": CUTOFF,
        }
    ),
    agent=st.sampled_from(["a", "b", "c", ""]),
    tool=st.sampled_from(["search_evidence", "open_document"]),
    query=optional_text,
    doc_id=optional_text,
    k=st.none() | st.integers(0, 20),
    doc_ids=st.lists(st.text(max_size=4), max_size=3),
    reason=st.none() | st.sampled_from(["unknown", "after_cutoff"]),
)


@settings(max_examples=200, deadline=None)
@given(records=st.lists(logged, min_size=1, max_size=8))
def test_a_record_gives_back_the_accesses_it_was_made_of(records: list[RetrievalRecord]) -> None:
    """Written without the fields at their defaults, read back whole: by agent, each agent's
    in the order made; as objects and as the JSON a reader of dicts sees."""
    built = RetrievalsData.payload([Logged.of(r) for r in records])
    payload = built.data
    assert built.floats == [] == list(floats_in(payload))  # an access holds no float
    data = RetrievalsData.model_validate(payload)
    ordered = sorted(records, key=lambda r: r.agent)
    assert data.records("t0.2", 3) == ordered
    assert [Logged.of(r).records() for r in records] == [[r] for r in records]  # nothing lost
    raw = json.loads(json.dumps(payload))
    assert accesses_of("retrievals", raw, "t0.2", 3) == [r.model_dump(mode="json") for r in ordered]
