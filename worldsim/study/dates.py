"""Forecast dates of a study: where in a card's forecast window a run's "today" is set.

The window runs from the card's ``opens`` date (the earliest it may be forecast), else its
``as_of``, to its end: the label's ``resolved_at`` when labels are given, else the card's
deadline. With ``start`` its first moment and ``span`` its length:

* ``card`` — the card's own ``as_of`` (or ``opens``, when the card opens later);
* ``early``, ``mid``, ``late`` — the midpoints of the 0–⅓, ⅓–⅔ and ⅔–0.95 segments:
  ``start + span × (1/6, 1/2, 97/120 ≈ 0.808)``;
* ``near_resolution`` — one day before the window's end;
* an ISO date (``2025-03-01``) or datetime — that moment.

A run simulates from its forecast date to the card's deadline, so the date must lie in
``[start, deadline)``, and before the label's ``resolved_at`` when one is given (by then the
answer was known); a date outside is an error naming the card. A computed date (a
keyword's) is rounded up to the whole second; a date given is kept to the microsecond, since
the gateway's cut-off is that moment.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from worldsim.domain.cards import Card, parse_utc

__all__ = ["DATE_KEYWORDS", "SEGMENTS", "check_date_name", "forecast_date", "window"]

SEGMENTS: dict[str, tuple[float, float]] = {
    "early": (0.0, 1 / 3),
    "mid": (1 / 3, 2 / 3),
    "late": (2 / 3, 0.95),
}
"""The window's segments; a keyword's date is its segment's midpoint."""
DATE_KEYWORDS = ("card", *SEGMENTS, "near_resolution")
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}([T ].*)?$")


def check_date_name(name: str) -> str:
    """A forecast date as a manifest gives it: a keyword or an ISO date (ValueError if not)."""
    if name in DATE_KEYWORDS:
        return name
    if not _ISO.match(name):
        raise ValueError(
            f"unknown forecast date {name!r}: use {', '.join(DATE_KEYWORDS)} or an ISO date"
        )
    parse_utc(name)  # raises ValueError with its own words
    return name


def window(card: Card, resolved_at: datetime | None = None) -> tuple[datetime, datetime]:
    """The card's forecast window: its opens date (else as_of), and the resolution date (else
    the deadline)."""
    return card.opens or card.as_of, resolved_at or card.deadline


def _whole_second(when: datetime) -> datetime:
    """A computed date rounded up to the whole second (never earlier than computed)."""
    return when.replace(microsecond=0) + timedelta(seconds=1) if when.microsecond else when


def forecast_date(card: Card, name: str, resolved_at: datetime | None = None) -> datetime:
    """The moment ``name`` stands for on ``card`` (see the module's doc); a date outside the
    window's ``[start, end)``, the deadline its latest end, raises ValueError."""
    start, end = window(card, resolved_at)
    if name == "card":
        when = start
    elif name in SEGMENTS:
        low, high = SEGMENTS[name]
        when = _whole_second(start + (end - start) * ((low + high) / 2))
    elif name == "near_resolution":
        when = _whole_second(end - timedelta(days=1))
    else:
        when = parse_utc(check_date_name(name))  # that moment, to the microsecond
    stop = min(end, card.deadline)
    if not start <= when < stop:
        until = "its label's resolution" if stop < card.deadline else "its deadline"
        raise ValueError(
            f"forecast date {name} ({when.isoformat()}) of card '{card.id}' is outside its "
            f"window [{start.isoformat()}, {stop.isoformat()}) (to {until})"
        )
    return when
