"""Free text as a safe FTS5 expression: what an agent types never becomes FTS5 syntax."""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Sequence

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
    if text.isalnum():  # one word (every character ``isalnum`` takes, ``\w`` matches)
        return [f'"{text.lower()}"']
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
        return tuple(dict.fromkeys(self._words(query)))[:_MAX_QUERY_TERMS]

    def shared(self, queries: Sequence[str]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """:meth:`__call__` of many queries, each as its own words and ``rest``: the query's
        terms are its own followed by those of ``rest`` not among them. Where the queries end
        with the same text from a whitespace on (each actor's name before the same question),
        ``rest`` is that text's terms, one tuple for all, and a query's own words are those of
        what precedes it (all of its words where they and ``rest`` pass the 64-term limit)."""
        tail = _common_tail(queries)
        if not tail:
            return [(self(query), ()) for query in queries]
        rest = tuple(dict.fromkeys(self._words(tail)))
        held = frozenset(rest)
        room = _MAX_QUERY_TERMS - len(rest)
        cut = len(tail)
        out: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        for query in queries:
            own = tuple(dict.fromkeys(self._words(query[:-cut])))
            if len(own) > room and len(own) - len(held.intersection(own)) > room:
                out.append((self(query), ()))  # the limit cuts: the query's words alone
            else:
                out.append((own, rest))
        return out

    def _words(self, text: str) -> list[str]:
        """Each word of ``text``, lower-cased and quoted, in order (repeats kept), a piece's
        words remembered."""
        pieces = self._pieces
        words: list[str] = []
        for piece in text.split():
            quoted = pieces.get(piece)
            if quoted is None:
                if len(pieces) >= self._size:
                    pieces.popitem(last=False)
                quoted = pieces[piece] = _quoted(piece)
            words += quoted
        return words


def _common_tail(texts: Sequence[str]) -> str:
    """The longest text that ends every one of ``texts``, starts with whitespace and holds a
    word ("" where there is none, or for fewer than two texts)."""
    if len(texts) < 2:
        return ""
    backwards = [text[::-1] for text in texts]
    first, last = min(backwards), max(backwards)  # what these two share, every text shares
    pairs = enumerate(zip(first, last, strict=False))  # to the shorter one's end
    same = next((i for i, (a, b) in pairs if a != b), len(first))
    tail = first[:same][::-1]
    start = next((i for i, c in enumerate(tail) if c.isspace()), len(tail))
    tail = tail[start:]
    return tail if _TOKEN.search(tail) else ""


def fts_query(query: str) -> str | None:
    """Turn free text into a safe FTS5 expression: every word quoted (:func:`query_terms`),
    joined with OR. BM25 still rewards documents matching more terms. ``None`` when the text
    holds no word at all."""
    terms = query_terms(query)
    return " OR ".join(terms) if terms else None
