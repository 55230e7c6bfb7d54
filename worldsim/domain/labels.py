"""A card's private resolution: its label (DESIGN §5), resolved or provisional.

Labels are kept apart from cards: a run never reads them; scoring and the audit do.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from worldsim.domain.cards import UtcDatetime
from worldsim.domain.files import load_model

__all__ = ["PROVISIONAL", "Label", "load_label"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


PROVISIONAL = "provisional"
"""The outcome of a provisional label: the question is still open, and ``value`` is its market
value on ``valued_at``. Scored by Brier only; never a resolution date."""


class Label(_Model):
    """The private resolution of a card, or a provisional one (see `PROVISIONAL`)."""

    card_id: str
    outcome: str
    resolved_at: UtcDatetime | None = None
    value: float | None = Field(
        None, ge=0.0, le=1.0, description="a provisional label: the market's value (Brier only)"
    )
    valued_at: UtcDatetime | None = Field(
        None, description="a provisional label: the date of its value (not a resolution)"
    )
    sources: tuple[str, ...] = ()
    forecast_due_date: date | None = Field(
        None,
        description="the forecast due date of the ForecastBench round whose resolution set "
        "gave the label",
    )
    masked_entities: tuple[str, ...] = ()
    mask_map: dict[str, str] = Field(default_factory=dict)
    auxiliary: dict[str, Literal["yes", "no"]] = Field(
        default_factory=dict,
        description="outcomes of the card's auxiliary endpoints, for the audit (never scored)",
    )

    @field_validator("outcome", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> str:
        return _outcome(value)

    @model_validator(mode="after")
    def _provisional_has_a_value(self) -> Label:
        if self.outcome == PROVISIONAL:
            if self.value is None:
                raise ValueError("a provisional label needs the market's value in 'value'")
            if self.resolved_at is not None:
                raise ValueError(
                    "a provisional label has no resolved_at (its date goes in 'valued_at')"
                )
        elif self.value is not None or self.valued_at is not None:
            raise ValueError("only a provisional label carries 'value' and 'valued_at'")
        return self

    @property
    def provisional(self) -> bool:
        """Whether the question is still open (see `PROVISIONAL`)."""
        return self.outcome == PROVISIONAL

    @field_validator("auxiliary", mode="before")
    @classmethod
    def _normalise_auxiliary(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # pydantic names the type error
        out: dict[str, str] = {}
        for key, outcome in value.items():
            text = _outcome(outcome)
            if text not in ("yes", "no"):
                raise ValueError(f"auxiliary outcome of '{key}' must be yes or no, not {text!r}")
            out[str(key)] = text
        return out


def _outcome(value: Any) -> str:
    """``yes``/``no`` from the spellings labels use (bool, 1/0, true/false), else the text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and value in (0, 1):
        return "yes" if value == 1 else "no"
    text = str(value).strip()
    lowered = text.lower()
    if lowered in {"yes", "1", "true"}:
        return "yes"
    if lowered in {"no", "0", "false"}:
        return "no"
    if not text:
        raise ValueError("outcome is empty")
    return text


def load_label(path: str | Path) -> Label:
    """Load one label file (YAML or JSON)."""
    return load_model(path, Label, what="label")
