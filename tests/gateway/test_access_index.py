"""The access log's index agrees with a plain scan of the log."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.gateway.test_store_and_tools import CUTOFF
from worldsim.gateway import RetrievalRecord, retrieved_by
from worldsim.gateway.access import AccessLog

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
