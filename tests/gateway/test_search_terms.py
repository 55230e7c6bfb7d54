"""A search ranks exactly as SQLite ranks the whole query, though it drops the words no visible
document holds before ranking (so that queries differing only there share one ranking)."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.strategies import EPOCH, WORDS, documents, documents_of
from worldsim.domain.cards import EvidenceDoc
from worldsim.gateway import memory_store
from worldsim.gateway.search_terms import QueryTerms, fts_query, query_terms

#: words the documents are not made of: names, numbers, one whose stem they hold, and words
#: the tokenizer reads otherwise than the query's word pattern (underscores)
OTHER = ("actor", "0042", "zebra", "reviewer", "7", "ünïcode", "_", "review_", "merger_votes")

queries = st.lists(st.sampled_from(WORDS + OTHER), min_size=1, max_size=8).map(" ".join)
asks = st.lists(
    st.tuples(queries, st.integers(1, 8), st.integers(-(10**6), 10**6 + 1)), min_size=1, max_size=6
)


def _whole_query(
    docs: list[EvidenceDoc], query: str, before: datetime, k: int
) -> list[tuple[str, float, str]]:
    """The ranking of the whole OR query, computed here from the documents alone: an FTS5
    table of the documents published before ``before``, ranked by ``bm25`` with snippets."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(title, text, tokenize='porter unicode61')")
    db.execute("CREATE TABLE d (rowid INTEGER PRIMARY KEY, id TEXT, published REAL)")
    for rowid, doc in enumerate(docs, start=1):
        published = doc.published_at.timestamp()
        if published < before.timestamp():
            db.execute(
                "INSERT INTO f (rowid, title, text) VALUES (?, ?, ?)", (rowid, doc.title, doc.text)
            )
            db.execute("INSERT INTO d VALUES (?, ?, ?)", (rowid, doc.id, published))
    expression = fts_query(query)
    assert expression is not None
    rows = db.execute(
        "SELECT d.id, bm25(f) AS score, snippet(f, 1, '[', ']', '…', 16) FROM f "
        "JOIN d ON d.rowid = f.rowid WHERE f MATCH ? "
        "ORDER BY score ASC, d.published DESC, d.id ASC LIMIT ?",
        (expression, k),
    ).fetchall()
    db.close()
    return [(str(i), float(score), str(snippet)) for i, score, snippet in rows]


async def _searched(
    docs: list[EvidenceDoc], asked: list[tuple[str, int, int]]
) -> list[list[tuple[str, float, str]]]:
    async with memory_store(docs) as store:
        return [
            [
                (hit.id, hit.score, hit.snippet)
                for hit in await store.search(query, before=EPOCH + timedelta(seconds=at), k=k)
            ]
            for query, k, at in asked
        ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=documents, asked=asks)
def test_a_search_ranks_as_the_whole_query_whatever_words_no_document_holds(
    docs: list[EvidenceDoc], asked: list[tuple[str, int, int]]
) -> None:
    """Same hits, order, BM25 scores (to the last bit) and snippets as the whole query."""
    searched = asyncio.run(_searched(docs, asked))
    expected = [
        _whole_query(docs, query, EPOCH + timedelta(seconds=at), k) for query, k, at in asked
    ]
    assert searched == expected


@pytest.mark.parametrize("name", ["actor 1", "actor 2", "zebra"])
def test_queries_that_differ_in_words_no_document_holds_get_the_same_hits(name: str) -> None:
    docs = [
        EvidenceDoc(id="a", published_at=EPOCH, title="Merger review", text="merger review votes"),
        EvidenceDoc(id="b", published_at=EPOCH, title="Rain", text="rain delay for the review"),
    ]
    later = EPOCH + timedelta(days=1)

    async def main() -> tuple[list[object], list[object]]:
        async with memory_store(docs) as store:
            plain = await store.search("merger review", before=later, k=5)
            named = await store.search(f"{name} merger review", before=later, k=5)
            return list(plain), list(named)

    plain, named = asyncio.run(main())
    assert [h.id for h in plain] == ["a", "b"]  # type: ignore[attr-defined]
    assert named == plain


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=60) | st.text(alphabet="AbC İıẞß_-:'\" 0é9", max_size=60))
def test_a_querys_terms_are_its_words_lower_cased_each_once_and_quoted(text: str) -> None:
    """Whatever the text (ASCII, or letters whose lower case is longer or another word)."""
    words = list(dict.fromkeys(t.lower() for t in re.findall(r"\w+", text)))[:64]
    assert fts_query(text) == (" OR ".join(f'"{w}"' for w in words) if words else None)


_SPACES = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u3000"


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(
        st.text(max_size=60)
        | st.text(alphabet="AbC İıẞß_-:'\" 0é9" + _SPACES, max_size=60)
        | st.lists(st.sampled_from(["Actor", "7", "ACTOR", "İx", "7.", "a_b"]), max_size=6).map(
            " ".join
        ),
        min_size=1,
        max_size=8,
    ),
    size=st.integers(1, 4),
)
def test_a_querys_terms_from_its_remembered_pieces_are_the_whole_querys(
    texts: list[str], size: int
) -> None:
    """Whatever whitespace separates the pieces, however few pieces are remembered, and
    whether a query's end was asked before (after other names)."""
    terms = QueryTerms(size)
    for text in texts:
        for name in ("", "Actor 1 ", "Actor 2\t", "  İx 3 actor ", "actor\n1 1 "):
            assert terms(name + text) == query_terms(name + text)


#: words a stemmer leaves as they are (ending in a digit), some made to look like suffixes
NUMBERED = ("2027", "q3", "a1", "ies1", "sses2", "running9", "007", "caresses1", "eed4")
numbered_texts = st.lists(st.sampled_from(WORDS + NUMBERED), min_size=1, max_size=10).map(" ".join)
numbered_documents = documents_of(numbered_texts, most=8)
numbered_asks = st.lists(
    st.tuples(
        st.lists(
            st.sampled_from((*NUMBERED, "2026", "b1", "ies", "running", "merger")), min_size=1
        ).map(" ".join),
        st.integers(1, 8),
        st.integers(-(10**6), 10**6 + 1),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=numbered_documents, asked=numbered_asks)
def test_words_ending_in_a_digit_are_held_as_the_index_holds_them(
    docs: list[EvidenceDoc], asked: list[tuple[str, int, int]]
) -> None:
    """A card's evidence answers which numbered words it holds from its terms: the searches
    rank as SQLite ranks the whole query."""
    searched = asyncio.run(_searched(docs, asked))
    expected = [
        _whole_query(docs, query, EPOCH + timedelta(seconds=at), k) for query, k, at in asked
    ]
    assert searched == expected


_MANY = [f"w{i}x" for i in range(70)]  # enough words to pass the 64-term limit


@settings(max_examples=300, deadline=None)
@given(
    heads=st.lists(
        st.text(alphabet="AbC İıẞß_-:'\" 0é9\t", max_size=12)
        | st.lists(st.sampled_from(["Actor", "7", "merger", "W0X", "review_"]), max_size=3).map(
            " ".join
        ),
        min_size=1,
        max_size=8,
    ),
    tail=st.text(alphabet="AbC İıẞß_-:'\" 0é9\t", max_size=30)
    | st.lists(st.sampled_from([*WORDS, "actor", "7", *_MANY]), max_size=70).map(" ".join),
    space=st.sampled_from([" ", "\t", "\u3000", ""]),
)
def test_the_words_of_queries_sharing_an_end_are_each_querys_own(
    heads: list[str], tail: str, space: str
) -> None:
    """A tick's queries (each actor's name before the same question) read as their own
    words before the words they share are each query's terms, whatever they share (nothing,
    words of their own, more than 64 words between them) and however they are spaced."""
    queries = [head + space + tail for head in heads]
    terms = QueryTerms(4)
    for query, (own, rest) in zip(queries, terms.shared(queries), strict=True):
        assert own + tuple(w for w in rest if w not in own) == query_terms(query)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=documents,
    names=st.lists(st.sampled_from(OTHER + WORDS), min_size=1, max_size=6),
    question=queries,
    k=st.integers(1, 8),
)
def test_a_batch_of_queries_sharing_an_end_ranks_each_as_its_whole_query(
    docs: list[EvidenceDoc], names: list[str], question: str, k: int
) -> None:
    """Searched together, each actor's name before the same question gets the hits, scores
    and snippets of its whole query, as searched alone."""
    asked = [f"{name} {question}" for name in names]
    before = EPOCH + timedelta(seconds=10**6 + 1)

    async def main() -> list[list[tuple[str, float, str]]]:
        async with memory_store(docs) as store:
            found = await store.search_many(asked, before=before, k=k)
        return [[(h.id, h.score, h.snippet) for h in hits] for hits in found]

    assert asyncio.run(main()) == [_whole_query(docs, query, before, k) for query in asked]
