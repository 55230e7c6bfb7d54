"""The access log's index agrees with a plain scan of the log."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.gateway.test_store_and_tools import CUTOFF
from worldsim.gateway import RetrievalRecord, retrieved_by
from worldsim.gateway.access_log import AccessLog

records = st.builds(
    RetrievalRecord,
    agent=st.sampled_from(["x", "y"]),
    timeline=st.sampled_from([None, "t0", "t0.1", "t0.2", "t0.1.1", "t0.11", "t1"]),
    tick=st.just(0),
    tool=st.just("open_document"),
    cutoff=st.just(CUTOFF),
    doc_ids=st.lists(st.sampled_from("abcdef"), max_size=3).map(tuple),
    refused=st.booleans(),
)


def _scan(log: list[RetrievalRecord], agent: str, timeline: str | None) -> set[str]:
    return {
        doc_id
        for record in log
        if record.agent == agent
        and not record.refused
        and (
            timeline is None
            or record.timeline is None
            or timeline == record.timeline
            or timeline.startswith(record.timeline + ".")
        )
        for doc_id in record.doc_ids
    }


@settings(max_examples=200, deadline=None)
@given(
    log=st.lists(records, max_size=25),
    agent=st.sampled_from(["x", "y", "z"]),
    timeline=st.sampled_from([None, "t0", "t0.1", "t0.1.1", "t0.11", "t0.2", "t1"]),
    cited=st.lists(
        st.tuples(st.sampled_from(["x", "y", "z"]), st.lists(st.sampled_from("abcdefg"))),
        max_size=5,
    ),
)
def test_indexed_retrieved_by_equals_a_rescan(
    log: list[RetrievalRecord],
    agent: str,
    timeline: str | None,
    cited: list[tuple[str, list[str]]],
) -> None:
    indexed = AccessLog(log[: len(log) // 2])
    indexed.extend(log[len(log) // 2 :])
    assert list(indexed) == log
    scanned = _scan(log, agent, timeline)
    assert retrieved_by(indexed, agent, timeline=timeline) == scanned
    assert retrieved_by(iter(log), agent, timeline=timeline) == scanned  # any iterable
    # the ids each citing agent never received, once each, in citation order
    expected = [
        [i for i in dict.fromkeys(ids) if i not in _scan(log, who, timeline)] for who, ids in cited
    ]
    assert indexed.unreceived_each(cited, timeline) == expected
    assert [indexed.unreceived(iter(ids), who, timeline) for who, ids in cited] == expected
    # every document any agent received, refused accesses left out
    assert indexed.documents == {
        doc_id for record in log if not record.refused for doc_id in record.doc_ids
    }


def _inherited(record: RetrievalRecord, timeline: str, forked_at: dict[str, int]) -> bool:
    """Whether ``record`` is in what ``timeline`` inherited: its own, or an ancestor's made up
    to the tick the ancestor's child on the way to ``timeline`` forked off."""
    if record.timeline is None or record.timeline == timeline:
        return True
    if not timeline.startswith(record.timeline + "."):
        return False
    rest = timeline[len(record.timeline) + 1 :].split(".")
    child = f"{record.timeline}.{rest[0]}"
    return record.tick is None or record.tick <= forked_at[child]


@settings(max_examples=300, deadline=None)
@given(
    log=st.lists(
        st.builds(
            RetrievalRecord,
            agent=st.sampled_from(["x", "y"]),
            timeline=st.sampled_from([None, "t0", "t0.1", "t0.2", "t0.1.1"]),
            tick=st.integers(0, 4),
            tool=st.just("open_document"),
            cutoff=st.just(CUTOFF),
            doc_ids=st.lists(st.sampled_from("abcdef"), max_size=3).map(tuple),
            refused=st.booleans(),
        ),
        max_size=25,
    ),
    forks=st.fixed_dictionaries(
        {"t0.1": st.integers(0, 3), "t0.2": st.integers(0, 3), "t0.1.1": st.integers(0, 3)}
    ),
    agent=st.sampled_from(["x", "y"]),
    timeline=st.sampled_from(["t0", "t0.1", "t0.2", "t0.1.1"]),
    cited=st.lists(st.sampled_from("abcdefg"), max_size=5),
)
def test_a_child_inherits_its_parents_receipts_up_to_its_fork_only(
    log: list[RetrievalRecord],
    forks: dict[str, int],
    agent: str,
    timeline: str,
    cited: list[str],
) -> None:
    """What a parent receives after a child forked off is not the child's: which receipts a
    citation check counts does not depend on how far the parent has run meanwhile."""
    indexed = AccessLog()
    for child, tick in forks.items():
        indexed.forked(child, tick)
    indexed.extend(log)
    received = {
        doc_id
        for record in log
        if record.agent == agent and not record.refused and _inherited(record, timeline, forks)
        for doc_id in record.doc_ids
    }
    assert indexed.unreceived(cited, agent, timeline) == [
        i for i in dict.fromkeys(cited) if i not in received
    ]
