"""Lexical measures the builder uses: content words and their Jaccard similarity."""

from __future__ import annotations

import re

__all__ = ["content_words", "jaccard"]

_WORD = re.compile(r"[a-z]{4,}")
_STOP = frozenset(
    [
        "that",
        "this",
        "with",
        "from",
        "have",
        "will",
        "were",
        "been",
        "their",
        "there",
        "which",
        "about",
        "after",
        "before",
        "would",
        "could",
        "should",
        "into",
        "over",
        "under",
        "said",
        "says",
        "than",
        "then",
        "them",
        "they",
        "what",
        "when",
        "where",
        "while",
        "also",
        "more",
        "most",
        "other",
        "some",
        "such",
        "only",
        "very",
        "just",
        "year",
        "years",
        "week",
        "weeks",
        "month",
        "months",
        "today",
    ]
)


def content_words(text: str) -> frozenset[str]:
    """The lower-case words of four letters or more that are not stop words."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (1 for two empty sets)."""
    return len(a & b) / len(a | b) if a or b else 1.0
