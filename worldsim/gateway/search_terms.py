"""Free text as a safe FTS5 expression: what an agent types never becomes FTS5 syntax."""

from __future__ import annotations

import functools
import re

__all__ = ["fts_query", "query_terms"]

_MAX_QUERY_TERMS = 64
_TOKEN = re.compile(r"\w+", re.UNICODE)


@functools.lru_cache(maxsize=16_384)
def query_terms(query: str) -> tuple[str, ...]:
    """The words of free text as quoted FTS5 phrases: lower-cased, each once, in order, at most
    64. Agents write free text; FTS5 syntax (quotes, ``NEAR``, ``-``, ``:``) must never turn a
    query into a syntax error or an unintended operator."""
    if query.isascii():  # (lower-casing the whole text first changes no ASCII word)
        words = dict.fromkeys(_TOKEN.findall(query.lower()))
    else:
        words = dict.fromkeys(t.lower() for t in _TOKEN.findall(query))
    return tuple([f'"{word}"' for word in words])[:_MAX_QUERY_TERMS]


def fts_query(query: str) -> str | None:
    """Turn free text into a safe FTS5 expression: every word quoted (:func:`query_terms`),
    joined with OR. BM25 still rewards documents matching more terms. ``None`` when the text
    holds no word at all."""
    terms = query_terms(query)
    return " OR ".join(terms) if terms else None
