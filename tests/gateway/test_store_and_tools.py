"""Evidence store ranking, the access log, the tool descriptors and card-bound gateways."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from worldsim.domain.cards import Card, EvidenceDoc
from worldsim.domain.errors import ConfigError, GatewayRefusal
from worldsim.gateway import (
    GATEWAY_TOOLS,
    AgentTools,
    Gateway,
    RetrievalRecord,
    gateway_for_card,
    memory_store,
    open_store,
    unretrieved_citations,
)
from worldsim.gateway.search_terms import fts_query

CUTOFF = datetime(2026, 3, 1, tzinfo=UTC)

DOCS = [
    EvidenceDoc(
        id="a",
        published_at="2026-01-10T00:00:00Z",
        title="Merger review opened",
        text="Regulator R opened a merger review of Company A and Company B.",
    ),
    EvidenceDoc(
        id="b",
        published_at="2026-01-20T00:00:00Z",
        title="Weather report",
        text="Rain is expected across the region.",
    ),
    EvidenceDoc(
        id="c",
        published_at="2026-02-10T00:00:00Z",
        title="Merger remedies merger",
        text="Company A proposes merger remedies; merger approval hinges on divestment.",
    ),
    EvidenceDoc(
        id="late",
        published_at="2026-03-02T00:00:00Z",
        title="Merger approved",
        text="Regulator R approved the merger merger merger.",
    ),
]


def _card(evidence: object) -> Card:
    return Card.model_validate(
        {
            "id": "merger-review",
            "question": "Will Regulator R approve the merger?",
            "as_of": "2026-03-01",
            "deadline": "2026-04-01",
            "endpoints": [
                {"id": "yes", "title": "approved", "polarity": "yes"},
                {"id": "no", "title": "not approved", "polarity": "no"},
            ],
            "evidence": evidence,
        }
    )


@pytest.mark.asyncio
async def test_search_ranks_by_bm25_and_stems_with_porter() -> None:
    async with memory_store(DOCS) as store:
        hits = await store.search("mergers", before=CUTOFF, k=10)
    # "mergers" stems to "merger"; c mentions it most, b never; "late" is after the cutoff.
    assert [h.id for h in hits] == ["c", "a"]
    assert hits[0].score < hits[1].score


@pytest.mark.asyncio
async def test_fts_syntax_in_queries_is_treated_as_words() -> None:
    assert fts_query('merger" OR NEAR(-x:') == '"merger" OR "or" OR "near" OR "x"'
    assert fts_query("  ?! ") is None
    async with memory_store(DOCS) as store:
        gateway = Gateway(store, cutoff=CUTOFF)
        assert [h.id for h in await gateway.search('weather" NEAR(', 5)] == ["b"]
        assert await gateway.search("***", 5) == []


@pytest.mark.asyncio
async def test_access_log_records_searches_opens_and_refusals() -> None:
    async with memory_store(DOCS) as store:
        gateway = Gateway(store, cutoff=CUTOFF)
        await gateway.search("merger", 1, agent="regulator", timeline="t0", tick=2)
        await gateway.open_document("a", agent="regulator", timeline="t0.1", tick=3)
        with pytest.raises(GatewayRefusal) as late:
            await gateway.open_document("late", agent="regulator", timeline="t0.1", tick=3)
        with pytest.raises(GatewayRefusal) as unknown:
            await gateway.open_document("nope", agent="firm", timeline="t0", tick=3)
        # the caller cannot tell a document after the cutoff from one that does not exist
        assert (late.value.reason, unknown.value.reason) == ("unknown", "unknown")
        assert len(gateway.access_log) == 4
        first = gateway.drain()
        assert gateway.drain() == [] and gateway.access_log == ()  # drained records let go
        await gateway.search("rain", 3, agent="firm")
        assert len(gateway.access_log) == 1 and len(gateway.drain()) == 1
        # what was drained still counts: the citation index and the documents received
        assert gateway.unretrieved_citations(["a", "c", "b"], "regulator", timeline="t0.1") == ["b"]
        assert "a" in gateway.documents and "late" not in gateway.documents
        # drained by timeline: another timeline's records wait for their own drain
        await gateway.search("rain", 3, agent="firm", timeline="t0", tick=4)
        await gateway.open_document("b", agent="firm", timeline="t0.1", tick=4)
        await gateway.search("wind", 3, agent="regulator", timeline="t0", tick=4)
        mine = gateway.drain("t0")
        assert [(r.agent, r.query) for r in mine] == [("firm", "rain"), ("regulator", "wind")]
        assert [r.timeline for r in gateway.access_log] == ["t0.1"]
        assert gateway.drain("t0") == [] and len(gateway.drain("t0.1")) == 1
        assert gateway.access_log == ()
        assert gateway.unretrieved_citations(["b"], "firm", timeline="t0.1") == []
    assert len(first) == 4
    search, opened, refused, missing = first
    assert search == RetrievalRecord(
        agent="regulator",
        timeline="t0",
        tick=2,
        tool="search_evidence",
        query="merger",
        k=1,
        cutoff=CUTOFF,
        doc_ids=("c",),
    )
    assert opened.doc_ids == ("a",) and not opened.refused
    assert refused.refused and refused.reason == "after_cutoff" and refused.doc_ids == ()
    assert missing.reason == "unknown"
    data = search.model_dump(mode="json")
    assert data["cutoff"] == "2026-03-01T00:00:00Z" and data["tool"] == "search_evidence"


def test_citations_of_documents_never_retrieved_are_flagged() -> None:
    log = [
        RetrievalRecord(
            agent="x",
            timeline="t0",
            tick=1,
            tool="search_evidence",
            query="q",
            cutoff=CUTOFF,
            doc_ids=("a", "b"),
        ),
        RetrievalRecord(
            agent="x",
            timeline="t0.2",
            tick=4,
            tool="open_document",
            doc_id="c",
            cutoff=CUTOFF,
            doc_ids=("c",),
        ),
        RetrievalRecord(
            agent="x",
            timeline="t0",
            tick=2,
            tool="open_document",
            doc_id="late",
            cutoff=CUTOFF,
            refused=True,
            reason="after_cutoff",
        ),
        RetrievalRecord(
            agent="y",
            timeline="t0",
            tick=1,
            tool="open_document",
            doc_id="d",
            cutoff=CUTOFF,
            doc_ids=("d",),
        ),
    ]
    cited = ["a", "d", "late", "c", "a", "zz"]
    assert unretrieved_citations(cited, log, "x") == ["d", "late", "zz"]
    # In t0.1 only t0's records count: c was opened in the sibling t0.2.
    assert unretrieved_citations(cited, log, "x", timeline="t0.1") == ["d", "late", "c", "zz"]
    assert unretrieved_citations(cited, log, "x", timeline="t0.2") == ["d", "late", "zz"]


def test_tool_descriptors_are_openai_function_tools() -> None:
    names = [t.name for t in GATEWAY_TOOLS]
    assert names == ["search_evidence", "open_document"]
    search = GATEWAY_TOOLS[0].openai()
    assert search["type"] == "function"
    params = search["function"]["parameters"]
    assert params["type"] == "object" and params["required"] == ["query"]
    assert params["properties"]["k"]["maximum"] == 20
    assert GATEWAY_TOOLS[1].parameters["required"] == ["doc_id"]


@pytest.mark.asyncio
async def test_agent_tools_run_calls_and_return_refusals_as_data() -> None:
    async with memory_store(DOCS) as store:
        gateway = Gateway(store, cutoff=CUTOFF)
        tools = AgentTools(gateway, agent="firm", timeline="t0", tick=1)
        found = await tools.call("search_evidence", '{"query": "merger", "k": 2}')
        assert [r["id"] for r in found["results"]] == ["c", "a"]
        doc = await tools.call("open_document", {"doc_id": "a"})
        assert doc["document"]["text"].startswith("Regulator R")
        refused = await tools.call("open_document", {"doc_id": "late"})
        assert refused == {
            "error": "no document 'late' in the evidence store",
            "reason": "unknown",
            "doc_id": "late",
        }
        with pytest.raises(ConfigError, match="k"):
            await tools.call("search_evidence", {"query": "x", "k": 99})
        with pytest.raises(ConfigError, match="unknown tool"):
            await tools.call("browse", {})
        assert [r.agent for r in gateway.access_log] == ["firm", "firm", "firm"]


@pytest.mark.asyncio
async def test_a_tool_answer_changed_by_its_caller_leaves_the_next_answer_alone() -> None:
    """Answers are made once per hit and document; each caller gets its own copy."""
    async with memory_store(DOCS) as store:
        tools = AgentTools(Gateway(store, cutoff=CUTOFF), agent="firm", timeline="t0", tick=1)
        first = await tools.call("search_evidence", {"query": "merger", "k": 2})
        opened = await tools.call("open_document", {"doc_id": "a"})
        expected = (json.dumps(first), json.dumps(opened))
        first["results"][0]["title"] = "changed"
        first["results"].pop()
        opened["document"]["text"] = "changed"
        again = await tools.call("search_evidence", {"query": "merger", "k": 2})
        reopened = await tools.call("open_document", {"doc_id": "a"})
        assert (json.dumps(again), json.dumps(reopened)) == expected


@pytest.mark.asyncio
async def test_gateway_for_card_uses_inline_evidence_and_as_of_cutoff() -> None:
    card = _card([d.model_dump(mode="json") for d in DOCS])
    async with gateway_for_card(card) as gateway:
        assert gateway.cutoff == CUTOFF
        assert {h.id for h in await gateway.search("merger approved", 10)} == {"a", "c"}


@pytest.mark.asyncio
async def test_gateway_for_card_opens_a_database_relative_to_the_card(tmp_path: Path) -> None:
    async with open_store(tmp_path / "ev" / "evidence.db", create=True) as store:
        report = await store.add([*DOCS, DOCS[0]])
        assert (report.added, report.duplicate_ids) == (4, ("a",))
        assert (await store.add(DOCS[:2])).duplicates == 2
    card = _card({"database": "ev/evidence.db"})
    async with gateway_for_card(card, card_path=tmp_path / "card.yaml") as gateway:
        assert [h.id for h in await gateway.search("rain", 5)] == ["b"]
    with pytest.raises(ConfigError, match="evidence database not found"):
        async with gateway_for_card(
            _card({"database": "missing.db"}), card_path=tmp_path / "card.yaml"
        ):
            pass


@pytest.mark.asyncio
async def test_a_file_that_is_not_an_evidence_database_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text(json.dumps({"not": "sqlite"}))
    with pytest.raises(ConfigError, match=r"junk\.db"):
        async with open_store(junk):
            pass
