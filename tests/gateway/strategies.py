"""Hypothesis strategies for evidence stores: small documents made of a few words, dated around
one instant, so that searches match, tie and cut off often."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from worldsim.domain.cards import EvidenceDoc

EPOCH = datetime(2026, 3, 1, tzinfo=UTC)
WORDS = ("merger", "review", "approval", "regulators", "approved", "rain", "votes", "delay")


def documents_of(
    texts: st.SearchStrategy[str], most: int = 12
) -> st.SearchStrategy[list[EvidenceDoc]]:
    """Lists of documents whose title and text are drawn from ``texts``."""
    return st.lists(
        st.tuples(st.integers(-(10**6), 10**6), texts, texts), min_size=1, max_size=most
    ).map(
        lambda rows: [
            EvidenceDoc(
                id=f"d{i}", published_at=EPOCH + timedelta(seconds=s), title=title, text=text
            )
            for i, (s, title, text) in enumerate(rows)
        ]
    )


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=10).map(" ".join)
documents = documents_of(texts)
