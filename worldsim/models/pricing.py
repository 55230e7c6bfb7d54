"""Prices per model, the cost of a call, and the run's budget.

The shipped table (``prices.yaml``) holds USD per million input, cached-input and output
tokens for a few common models; a user file in the same format overrides or extends it.
Cached input tokens are counted inside input tokens (as OpenAI reports them) and charged at the
cached price; reasoning tokens are counted inside output tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsim.domain.contracts import Model, ModelRequest, ModelResponse
from worldsim.domain.errors import BudgetExhausted, ConfigError, ModelError
from worldsim.domain.files import first_error, load_mapping
from worldsim.models.call import Usage

__all__ = ["Budget", "BudgetedModel", "Price", "PriceTable"]

_DATE_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class Price(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    output: float = Field(ge=0)

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        total = (
            (usage.input_tokens - cached) * self.input
            + cached * cached_rate
            + usage.output_tokens * self.output
        )
        return total / 1_000_000


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Model name (or full route) → `Price`."""

    prices: Mapping[str, Price]

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The shipped table, overridden entry by entry by the file at ``path`` if given."""
        shipped = resources.files("worldsim.models").joinpath("prices.yaml").read_text("utf-8")
        table = _parse(yaml.safe_load(shipped), source="worldsim/models/prices.yaml")
        if path is not None:
            table.update(_parse(load_mapping(path, what="price file", error=ConfigError), path))
        return cls(table)

    def lookup(self, names: Iterable[str | None]) -> Price | None:
        """The price of the first name found; dated snapshots fall back to their base name."""
        for name in names:
            if not name:
                continue
            for candidate in (name, _DATE_SUFFIX.sub("", name)):
                if candidate in self.prices:
                    return self.prices[candidate]
        return None

    def cost(self, names: Iterable[str | None], usage: Usage) -> float | None:
        """The call's cost in USD, or ``None`` when no name is priced."""
        price = self.lookup(names)
        return None if price is None else round(price.cost(usage), 10)


def _parse(data: Any, source: str | Path) -> dict[str, Price]:
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ConfigError("a price file holds a 'models' mapping", file=source, field="models")
    table: dict[str, Price] = {}
    for name, entry in data["models"].items():
        try:
            table[str(name)] = Price.model_validate(entry)
        except ValidationError as exc:
            where, message = first_error(exc)
            raise ConfigError(message, file=source, field=f"models.{name}.{where}") from None
    return table


class Budget:
    """The most a run may spend, shared by every route.

    `check` refuses a new call once the spend reaches the limit; `charge` adds a finished call's
    cost. Calls already in flight when the limit is reached still finish and are charged.
    """

    def __init__(self, max_usd: float | None = None) -> None:
        if max_usd is not None and max_usd < 0:
            raise ConfigError("the budget must not be negative", field="--budget")
        self.max_usd = max_usd
        self.spent_usd = 0.0
        self.calls = 0
        self.unpriced_calls = 0

    @property
    def remaining_usd(self) -> float | None:
        return None if self.max_usd is None else max(0.0, self.max_usd - self.spent_usd)

    @property
    def exhausted(self) -> bool:
        return self.max_usd is not None and self.spent_usd >= self.max_usd

    def check(self, request: ModelRequest | None = None) -> None:
        """Raise `BudgetExhausted` if no more calls may start."""
        if self.exhausted:
            site = request.site if request is not None else None
            raise BudgetExhausted(
                f"budget of ${self.max_usd:.4f} reached (spent ${self.spent_usd:.4f} "
                f"over {self.calls} calls)",
                timeline=site.timeline if site else None,
                tick=site.tick if site else None,
            )

    def charge(self, cost_usd: float | None) -> None:
        self.calls += 1
        if cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.spent_usd += cost_usd


@dataclass(frozen=True, slots=True)
class BudgetedModel:
    """Wrapper: check the budget before each call, charge the recorded cost after it.

    Failed calls are charged too (their tokens were paid for); cache hits cost nothing because
    the cache sits outside this wrapper.
    """

    inner: Model
    budget: Budget

    @property
    def route(self) -> str:
        return self.inner.route

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.budget.check(request)
        try:
            response = await self.inner.request(request)
        except ModelError as exc:
            self.budget.charge(exc.call.get("cost_usd"))
            raise
        self.budget.charge(response.call.get("cost_usd"))
        return response
