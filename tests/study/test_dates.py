"""Forecast dates lie in the card's window, in order, and a date outside it is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.support import DEMO_CARD
from worldsim.domain.cards import load_card
from worldsim.domain.errors import CardError
from worldsim.study.dates import forecast_date

BASE = load_card(DEMO_CARD)


@given(
    start=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
    ),
    span_hours=st.integers(min_value=6 * 24, max_value=24 * 3650),
    early_resolution=st.floats(min_value=0.3, max_value=1.0),
)
def test_keyword_dates_lie_in_the_window_in_order(
    start: datetime, span_hours: int, early_resolution: float
) -> None:
    deadline = start + timedelta(hours=span_hours)
    card = BASE.model_copy(update={"as_of": start, "deadline": deadline})
    resolved = start + (deadline - start) * early_resolution
    if resolved - start < timedelta(days=6):
        resolved = None  # the window then ends at the deadline
    dates = [forecast_date(card, name, resolved) for name in ("card", "early", "mid", "late")]
    near = forecast_date(card, "near_resolution", resolved)
    end = resolved or deadline
    assert dates[0] == start
    assert dates == sorted(dates) and len(set(dates)) == 4
    assert dates[-1] < near < end
    assert all(start <= d < deadline for d in [*dates, near])


def test_midpoints_are_the_documented_fractions() -> None:
    card = BASE.model_copy(
        update={
            "as_of": datetime(2030, 1, 1, tzinfo=UTC),
            "deadline": datetime(2030, 4, 11, tzinfo=UTC),
        }
    )
    assert forecast_date(card, "mid") == datetime(2030, 2, 20, tzinfo=UTC)  # half of 100 days
    # (2/3 + 0.95) / 2 × 100 days = 80 days 20 hours
    assert forecast_date(card, "late") == datetime(2030, 3, 22, 20, tzinfo=UTC)
    assert forecast_date(card, "near_resolution") == datetime(2030, 4, 10, tzinfo=UTC)


@pytest.mark.parametrize("name", ["2029-12-31", "2030-04-11", "2031-01-01"])
def test_a_date_outside_the_window_is_refused(name: str) -> None:
    card = BASE.model_copy(
        update={
            "as_of": datetime(2030, 1, 1, tzinfo=UTC),
            "deadline": datetime(2030, 4, 11, tzinfo=UTC),
        }
    )
    with pytest.raises(ValueError, match="outside its window"):
        forecast_date(card, name)


def test_an_opens_date_starts_the_window() -> None:
    card = BASE.model_copy(
        update={
            "as_of": datetime(2030, 1, 1, tzinfo=UTC),
            "opens": datetime(2030, 1, 21, tzinfo=UTC),
            "deadline": datetime(2030, 4, 11, tzinfo=UTC),
        }
    )
    assert forecast_date(card, "card") == datetime(2030, 1, 21, tzinfo=UTC)
    assert forecast_date(card, "mid") == datetime(2030, 3, 2, tzinfo=UTC)  # 21 Jan + 40 of 80 days
    with pytest.raises(ValueError, match="outside its window"):
        forecast_date(card, "2030-01-10")  # after as_of, but before the question opens


@pytest.mark.parametrize(
    ("opens", "field_ok"),
    [("2030-01-01T00:00:00Z", True), ("2029-12-31T00:00:00Z", False), ("2030-04-11", False)],
)
def test_a_card_validates_its_opens_date(tmp_path: Path, opens: str, field_ok: bool) -> None:
    text = DEMO_CARD.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    data.update(
        as_of="2030-01-01T00:00:00Z", deadline="2030-04-11T00:00:00Z", opens=opens, evidence=None
    )
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    if field_ok:
        assert load_card(path).opens == datetime(2030, 1, 1, tzinfo=UTC)
    else:
        with pytest.raises(CardError, match="must be on or after as_of"):
            load_card(path)
