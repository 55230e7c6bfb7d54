"""What the evidence store holds and hands out: dated documents, search hits and ingest reports,
and the integer epoch microseconds every cutoff test compares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from worldsim.domain.errors import ConfigError

__all__ = [
    "DOCUMENT_COLUMNS",
    "IngestReport",
    "SearchHit",
    "StoredDocument",
    "from_iso",
    "to_epoch_us",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: The columns of a stored document, in the order :meth:`StoredDocument.of_row` reads them.
DOCUMENT_COLUMNS = "id, published_at, published_us, title, text, url, source, stance"


def to_epoch_us(moment: datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime; naive datetimes are refused."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ConfigError("datetime has no timezone; add 'Z' or an offset", field="cutoff")
    return (moment - _EPOCH) // timedelta(microseconds=1)


def from_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True, slots=True)
class _Dated:
    """What names a document and dates it, in a stored document and in a search hit alike."""

    id: str
    published_at: datetime
    published_us: int  # the same instant in epoch microseconds, for exact cut-off tests
    title: str


@dataclass(frozen=True, slots=True)
class StoredDocument(_Dated):
    """A document as kept in the store."""

    text: str
    url: str | None
    source: str | None
    stance: float | None

    @classmethod
    def of_row(cls, row: Sequence[Any]) -> StoredDocument:
        """The document of a row selected as :data:`DOCUMENT_COLUMNS`: its fields in order, the
        date as ISO text (``stance``, a REAL column, comes back a float or NULL)."""
        doc_id, published_at, *rest = row
        return cls(doc_id, from_iso(published_at), *rest)


@dataclass(frozen=True, slots=True)
class SearchHit(_Dated):
    """One search result; ``score`` is SQLite's ``bm25()`` (lower is a better match)."""

    source: str | None
    url: str | None
    score: float
    snippet: str


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What an ingest did: documents added and ids skipped as duplicates."""

    added: int
    duplicate_ids: tuple[str, ...]

    @property
    def duplicates(self) -> int:
        return len(self.duplicate_ids)
