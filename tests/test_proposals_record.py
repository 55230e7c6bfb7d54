"""A tick's proposals are one ``proposals`` record, in canonical order; a cut run restores
who proposed before its cut."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import cut_mid_run
from worldsim.domain.jsonbytes import compact_bytes, floats_in
from worldsim.sim.resume import Cut, restore_point, resume_config
from worldsim.sim.resuming import resume_run
from worldsim.trace.reader import read_trace
from worldsim.trace.records import ProposalData, ProposalsData, proposals_of
from worldsim.trace.verify import canonical_hash
from worldsim.world.moves import Proposal, Proposers
from worldsim.world.state import ShiftPressure


@pytest.fixture(scope="module")
def recorded(branching_demo_trace: Path) -> Path:
    return branching_demo_trace


def test_one_record_per_timeline_tick_in_canonical_order(recorded: Path) -> None:
    trace = read_trace(recorded)
    lines = list(trace.of_type("proposals"))
    places = [(line.tl, line.tick) for line in lines]
    assert len(lines) > 1 and len(set(places)) == len(places)
    assert len({line.tl for line in lines}) > 1, "the branching run traced several timelines"
    for line in lines:
        keys = [(p.agent, p.index) for p in line.data.proposals]
        assert keys and keys == sorted(keys)
        started = next(
            t for t in trace.of_type("tick_started") if (t.tl, t.tick) == (line.tl, line.tick)
        )
        # after the tick's accesses, before its review
        after = [t.type for t in trace.lines if (t.tl, t.tick) == (line.tl, line.tick)]
        assert after.index("proposals") < after.index("review")
        assert {p.agent for p in line.data.proposals} <= set(started.data.active)


def test_a_cut_run_restores_who_proposed_before_the_cut(recorded: Path, tmp_path: Path) -> None:
    whole = recorded
    full = read_trace(whole)
    path = cut_mid_run(whole, tmp_path / "cut.jsonl")
    trace = read_trace(path)
    point = restore_point(Cut(trace), resume_config(trace))
    seen = {(p.tl, p.tick, p.data.agent) for p in trace.proposals()}
    assert point.proposals_seen == seen and seen
    anyio.run(lambda: resume_run(path, fsync=False))
    assert canonical_hash(read_trace(path)) == canonical_hash(full)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


proposal = st.builds(
    Proposal,
    agent=st.sampled_from(["a", "b", "c"]),
    index=st.integers(0, 3),
    direction=st.floats(-1.0, 1.0),
    magnitude=st.floats(0.0, 1e-3),
    summary=st.text(max_size=8),
    deltas=st.lists(st.builds(ShiftPressure, endpoint=st.just("yes"), by=st.floats(-1, 1))).map(
        tuple
    ),
    cites=st.lists(st.sampled_from(["d1", "d2", "d3"]), max_size=3).map(tuple),
)


@settings(max_examples=100, deadline=None)
@given(
    made=st.lists(
        st.tuples(proposal, st.sampled_from(["actor", "cohort"]), st.lists(st.just("d9"))),
        max_size=6,
    )
)
def test_a_record_gives_back_the_proposals_it_was_made_of(
    made: list[tuple[Proposal, str, list[str]]],
) -> None:
    """Dumped together, each is what it is alone with its role and unretrieved citations; read
    back as objects and as the JSON a reader of dicts sees, in the order written."""
    built = ProposalsData.payload(*zip(*made, strict=True)) if made else None
    payload = built.data if built is not None else {"proposals": []}
    if built is None:
        assert ProposalsData.payload([], [], []).data == payload
    else:  # every float it holds is listed for the writer, which then writes what json does
        assert Counter(built.floats) == Counter(floats_in(payload))
        assert compact_bytes(payload, built.floats) == _json_bytes(payload)
    alone = [
        {**p.model_dump(mode="json"), "role": role, "unretrieved_citations": ids}
        for p, role, ids in made
    ]
    raw = json.loads(json.dumps(payload))
    assert raw["proposals"] == alone
    assert [dict(p) for p in proposals_of("proposals", raw)] == alone
    data = ProposalsData.model_validate(raw)
    assert [ProposalData.model_validate(item) for item in alone] == list(data.proposals)
    assert [p.model_dump(mode="json") for p in data.proposals] == alone
    assert proposals_of("review", raw) == []


_SEEN = st.tuples(st.sampled_from(["t0", "t0.1", "t0.2"]), st.integers(0, 3), st.text(max_size=3))


@settings(max_examples=60, deadline=None)
@given(ticks=st.lists(st.tuples(_SEEN, st.lists(st.text(max_size=3))), max_size=6), asked=_SEEN)
def test_proposers_kept_a_tick_at_a_time_are_the_set_of_their_authors(
    ticks: list[tuple[tuple[str, int, str], list[str]]], asked: tuple[str, int, str]
) -> None:
    proposers, expected = Proposers(), set()
    for (timeline, tick, first), agents in ticks:
        proposers.add_tick(timeline, tick, [first, *agents])
        expected |= {(timeline, tick, agent) for agent in [first, *agents]}
    assert proposers == expected and len(proposers) == len(expected)
    assert (asked in proposers) == (asked in expected)
    assert Proposers(expected) == proposers
