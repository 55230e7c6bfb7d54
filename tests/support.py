"""Helpers shared by the tests (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldsim.domain.cards import Card

ROOT = Path(__file__).resolve().parent.parent
DEMO_CARD = ROOT / "scenarios" / "merger-review.yaml"


def card_with(card: Card, **seed_changes: Any) -> Card:
    """A copy of ``card`` with some seed fields replaced (validated again)."""
    data = card.model_dump(mode="json")
    data["seeds"].update(seed_changes)
    return Card.model_validate(data)
