"""A run's interventions: changes made to its world at given dates (a study's "what if"),
each checked alone here and against the card by :class:`worldsim.domain.config.RunConfig`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from worldsim.domain import bounds
from worldsim.domain.cards import Card, UtcDatetime
from worldsim.domain.errors import ConfigError

__all__ = ["Intervention", "check_against"]

_NOT_FOR: dict[str, tuple[str, ...]] = {
    "event": ("hypothesis", "variable", "value"),
    "hypothesis": ("pressure", "variable", "value"),
    "variable": ("pressure", "hypothesis"),
}
"""The fields an intervention of each kind does not read: one given is refused, not ignored."""
_A = {"event": "an event", "hypothesis": "a hypothesis", "variable": "a variable"}
_WHAT_MOVES = {
    "event": "its `pressure` moves the world",
    "hypothesis": "the hypothesis's own impact moves the world",
    "variable": "it sets `variable` to `value`",
}


class Intervention(BaseModel):
    """A change made to a run's world (a study's "what if"): at ``at``, an ``event`` (a
    scheduled event with a title and a pressure shift, as the card's own events), a
    ``hypothesis`` forced true (the card's hypothesis ``hypothesis``: its impact on its endpoint
    as an event) or a ``variable`` set (the world variable ``variable`` takes ``value`` as the
    tick starts, announced as an event). The trace records each as an ``intervention`` record;
    the event reaches the world like a scheduled one."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.:-]+$")
    kind: Literal["event", "hypothesis", "variable"]
    at: UtcDatetime
    title: str | None = Field(None, min_length=1, max_length=bounds.MAX_TITLE_CHARS)
    description: str = Field("", max_length=bounds.MAX_TEXT_CHARS)
    pressure: float | dict[str, float] = 0.0
    """For an event: a shift toward yes (binary cards), or per scored endpoint; within
    ±``MAX_PRESSURE``, as a card event's."""
    hypothesis: str | None = None
    variable: str | None = Field(None, min_length=1, max_length=120)
    value: StrictBool | StrictInt | StrictFloat | str | None = None
    """For a variable: its new value (a number, a string or a boolean)."""

    @field_validator("value", mode="before")
    @classmethod
    def _plain_value(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{value} is not a finite number")
            return value
        raise ValueError(f"a number, a string or a boolean, not a {type(value).__name__}")

    @model_validator(mode="after")
    def _complete(self) -> Intervention:
        stray = [
            name
            for name in _NOT_FOR[self.kind]
            if getattr(self, name) not in (None, 0.0)  # pressure's default is 0.0
        ]
        if stray:
            raise ValueError(
                f"intervention '{self.id}': {_A[self.kind]} takes no `{stray[0]}` "
                f"({_WHAT_MOVES[self.kind]})"
            )
        if self.kind == "event" and self.title is None:
            raise ValueError(f"intervention '{self.id}': an event needs a title")
        if self.kind == "hypothesis" and self.hypothesis is None:
            raise ValueError(f"intervention '{self.id}': name the hypothesis to force")
        if self.kind == "variable" and (self.variable is None or self.value is None):
            raise ValueError(f"intervention '{self.id}': a variable needs `variable` and `value`")
        shifts = self.pressure.items() if isinstance(self.pressure, dict) else [("", self.pressure)]
        for endpoint, shift in shifts:
            if not -bounds.MAX_PRESSURE <= shift <= bounds.MAX_PRESSURE:  # nan fails too
                on = f" on '{endpoint}'" if endpoint else ""
                raise ValueError(
                    f"intervention '{self.id}': pressure {shift}{on} is outside "
                    f"±{bounds.MAX_PRESSURE:g} (a card event's bound)"
                )
        return self


def check_against(interventions: Sequence[Intervention], card: Card, start: datetime) -> None:
    """Refuse an intervention the run of ``card`` from ``start`` cannot apply: one outside
    [``start``, the deadline), a hypothesis the card does not have, a pressure on an endpoint it
    does not score, an id given twice; a `ConfigError` naming ``interventions.N``."""
    hypotheses = {h.id for h in card.seeds.hypotheses} if card.seeds else set()
    scored = {ep.id for ep in card.scored_endpoints}
    seen: set[str] = set()
    for i, iv in enumerate(interventions):
        if iv.id in seen:
            raise _at(i, f"id '{iv.id}' given twice")
        seen.add(iv.id)
        if not start <= iv.at < card.deadline:
            raise _at(
                i,
                f"'{iv.id}' at {iv.at.isoformat()} is outside the run "
                f"[{start.isoformat()}, {card.deadline.isoformat()})",
            )
        if iv.kind == "hypothesis" and iv.hypothesis not in hypotheses:
            raise _at(i, f"the card has no hypothesis '{iv.hypothesis}' to force")
        unscored = sorted(set(iv.pressure) - scored) if isinstance(iv.pressure, dict) else []
        if iv.kind == "event" and unscored:
            raise _at(
                i,
                f"'{iv.id}' pushes '{unscored[0]}', which is not a scored endpoint "
                f"of the card (pressure moves {', '.join(sorted(scored))})",
            )


def _at(index: int, message: str) -> ConfigError:
    """A rule of the run broken by intervention ``index``: named as its own field, as a rule of
    the intervention alone is (pydantic would name the whole list)."""
    return ConfigError(message, field=f"interventions.{index}")
