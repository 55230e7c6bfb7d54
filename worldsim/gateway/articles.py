"""Reading an articles file for the evidence store: every line checked, its date included,
before anything is written."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from worldsim.domain.cards import EvidenceDoc
from worldsim.domain.errors import CardError
from worldsim.domain.files import first_error, read_jsonl

__all__ = ["read_articles"]


def _date_problem(value: object) -> str | None:
    """Why an article's raw ``published_at`` is unusable, or ``None`` if it has a timezone.

    A bare date is refused too: it has no timezone, and a same-day document could fall on
    either side of an intra-day cutoff.
    """
    if value is None or value == "":
        return "missing publication date"
    if not isinstance(value, str):
        return f"expected an ISO datetime string, got {type(value).__name__}"
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return f"not an ISO datetime: {value!r}"
    if len(value.strip()) <= 10 or parsed.tzinfo is None or parsed.utcoffset() is None:
        return f"datetime {value!s} has no timezone; add a time with 'Z' or an offset"
    return None


def read_articles(path: str | Path) -> list[EvidenceDoc]:
    """Read and validate an articles JSONL file completely before anything is written.

    Each non-blank line is one object with ``id, published_at, title, text, url, source`` and
    an optional ``stance`` in [-1, 1]. The first bad line raises :class:`CardError` naming the
    file, the line and the field.
    """
    p = Path(path)
    docs: list[EvidenceDoc] = []
    for number, data in read_jsonl(p, what="articles file"):
        problem = _date_problem(data.get("published_at"))
        if problem is not None:
            raise CardError(problem, file=p, line=number, field="published_at")
        try:
            docs.append(EvidenceDoc.model_validate(data))
        except ValidationError as exc:
            field, message = first_error(exc)
            raise CardError(message, file=p, line=number, field=field) from None
    return docs
