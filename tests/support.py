"""Helpers shared by the tests (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldsim.domain.cards import Card

ROOT = Path(__file__).resolve().parent.parent
DEMO_CARD = ROOT / "scenarios" / "merger-review.yaml"


def cli_command_paths() -> list[tuple[str, ...]]:
    """Every command and subcommand of the CLI, e.g. ('run',), ('hindsight', 'ker')."""
    import typer.main

    from worldsim.cli import app

    paths: list[tuple[str, ...]] = []
    for name, command in typer.main.get_group(app).commands.items():
        paths.append((name,))
        paths.extend((name, sub) for sub in getattr(command, "commands", {}))
    return paths


def card_with(card: Card, **seed_changes: Any) -> Card:
    """A copy of ``card`` with some seed fields replaced (validated again)."""
    data = card.model_dump(mode="json")
    data["seeds"].update(seed_changes)
    return Card.model_validate(data)
