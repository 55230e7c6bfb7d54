"""Free text as a safe FTS5 expression: what an agent types never becomes FTS5 syntax."""

from __future__ import annotations

import functools
import re
from collections import OrderedDict

__all__ = ["QueryTerms", "fts_query", "query_terms"]

_MAX_QUERY_TERMS = 64
_TOKEN = re.compile(r"\w+", re.UNICODE)


@functools.lru_cache(maxsize=16_384)
def query_terms(query: str) -> tuple[str, ...]:
    """The words of free text as quoted FTS5 phrases: lower-cased, each once, in order, at most
    64. Agents write free text; FTS5 syntax (quotes, ``NEAR``, ``-``, ``:``) must never turn a
    query into a syntax error or an unintended operator."""
    return tuple(dict.fromkeys(_quoted(query)))[:_MAX_QUERY_TERMS]


def _quoted(text: str) -> list[str]:
    """Each word of ``text``, lower-cased and quoted, in order (repeats kept)."""
    if text.isascii():  # (lower-casing the whole text first changes no ASCII word)
        return [f'"{word}"' for word in _TOKEN.findall(text.lower())]
    return [f'"{word.lower()}"' for word in _TOKEN.findall(text)]


class QueryTerms:
    """:func:`query_terms` of many queries, the words of each whitespace-separated piece of a
    query worked out once and remembered (the ``size`` latest pieces): a tick's actors each
    ask their own name before the same question, so most of a new query's pieces were seen.

    A word never spans whitespace (no character ``str.split`` separates on is one ``\\w``
    matches), and lower-casing works a word at a time, so the pieces' words, in order, are the
    query's."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._pieces: OrderedDict[str, list[str]] = OrderedDict()

    def __call__(self, query: str) -> tuple[str, ...]:
        pieces = self._pieces
        words: list[str] = []
        for piece in query.split():
            quoted = pieces.get(piece)
            if quoted is None:
                if len(pieces) >= self._size:
                    pieces.popitem(last=False)
                quoted = pieces[piece] = _quoted(piece)
            words += quoted
        return tuple(dict.fromkeys(words))[:_MAX_QUERY_TERMS]


def fts_query(query: str) -> str | None:
    """Turn free text into a safe FTS5 expression: every word quoted (:func:`query_terms`),
    joined with OR. BM25 still rewards documents matching more terms. ``None`` when the text
    holds no word at all."""
    terms = query_terms(query)
    return " OR ".join(terms) if terms else None
