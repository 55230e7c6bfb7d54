"""Prices per model, the cost of a call, and the run's budget.

The shipped table (``prices.yaml``) holds USD per million input, cached-input and output
tokens for a few common models; a user file in the same format overrides or extends it.
Cached input tokens are counted inside input tokens (as OpenAI reports them) and charged at the
cached price; reasoning tokens are counted inside output tokens.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsim.domain.contracts import ModelRequest
from worldsim.domain.errors import BudgetExhausted, ConfigError, ProviderAnomaly
from worldsim.domain.files import first_error, load_mapping
from worldsim.models.call import Usage

__all__ = [
    "Budget",
    "Price",
    "PriceTable",
    "Reservation",
    "input_token_bound",
]

_DATE_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class Price(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

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

    def worst_case(self, input_tokens: int, max_output_tokens: int) -> float:
        """The most a call can cost: every input token uncached, every output token used."""
        rate = max(self.input, self.cached_input or 0.0)
        return (input_tokens * rate + max_output_tokens * self.output) / 1_000_000


def input_token_bound(payload: Any) -> int:
    """An upper bound on the input tokens of a request: the UTF-8 bytes of its JSON body.

    A byte-level tokenizer (OpenAI's, Llama's, every BPE with byte fallback) never makes more
    tokens than bytes, and the JSON framing of each message (about 30 bytes) outweighs the few
    tokens a chat template adds per message. It overestimates English prompts about four-fold;
    the excess is only held while the call runs.
    """
    return len(json.dumps(payload).encode("utf-8"))


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
    """The most a run (or several runs sharing it) may spend, with every route drawing on it.

    A call *reserves* its worst-case cost before it is sent and *settles* to its real cost when
    its reply arrives, giving back the difference; a reservation that does not fit waits while
    other reservations are outstanding (they usually settle for less), and is refused once none
    are. The first refusal closes the budget: no call starts after it, so the run stops with
    nothing in flight and nothing paid for lost. Spent plus reserved never exceeds ``max_usd``,
    so neither does the spend, as long as each call costs at most what it reserved.

    That condition is the provider's to keep: a reply reporting more usage than its request
    could cost is charged its reservation, and its route is *distrusted* (`distrust`): every
    later reservation for that route is refused with `ProviderAnomaly`, in every run sharing the
    budget, while other routes go on.

    Every check-and-reserve runs without an ``await`` in between, so reservations are atomic
    under anyio concurrency. ``spent_usd`` may start above zero: a resumed run continues from
    what its trace records as spent, and a budget shared by many runs can be persisted.
    """

    def __init__(
        self,
        max_usd: float | None = None,
        *,
        spent_usd: float = 0.0,
        raised_by: str = "a higher budget (--max-cost-usd) goes on",
    ) -> None:
        if max_usd is not None and max_usd < 0:
            raise ConfigError("the budget must not be negative", field="max_cost_usd")
        if spent_usd < 0:
            raise ConfigError("the amount spent must not be negative", field="spent_usd")
        self.max_usd = max_usd
        self.spent_usd = spent_usd
        self.reserved_usd = 0.0
        self.closed = False
        self.raised_by = raised_by
        """What a refusal says goes on: how the budget is raised where it was set."""
        self.distrusted: dict[str, str] = {}
        """Route → the message its calls are refused with (`distrust`)."""
        self._outstanding = 0
        self._settled: anyio.Event | None = None  # made on first wait, inside an event loop

    @property
    def remaining_usd(self) -> float | None:
        """What is neither spent nor reserved (``None``: no limit)."""
        if self.max_usd is None:
            return None
        return max(0.0, self.max_usd - self.spent_usd - self.reserved_usd)

    @property
    def waiting(self) -> int:
        """Calls waiting for an outstanding reservation to settle before they can reserve."""
        return 0 if self._settled is None else self._settled.statistics().tasks_waiting

    @property
    def exhausted(self) -> bool:
        return self.closed or (self.max_usd is not None and self.spent_usd >= self.max_usd)

    def distrust(self, route: str, message: str) -> None:
        """Refuse every later reservation for ``route`` with `ProviderAnomaly` and
        ``message`` (the first one given): its provider reported usage that no call of it
        could cost, said by the call that saw it."""
        self.distrusted.setdefault(route, message)

    @contextlib.asynccontextmanager
    async def reserve(
        self, usd: float, request: ModelRequest | None = None, *, route: str | None = None
    ) -> AsyncIterator[Reservation]:
        """Hold ``usd`` for one call on ``route`` while it runs; raise `BudgetExhausted` if it
        cannot fit (`ProviderAnomaly` if the route is distrusted).

        Call `Reservation.settle` with the real cost when the reply arrives; a reservation left
        unsettled (the call failed without a reply, or was cancelled) is released at no cost.
        """
        if usd < 0:
            raise ValueError("a reservation must not be negative")
        if route is not None and route in self.distrusted:
            raise self._distrusted(route, request)
        token = await self.acquire(usd, request, route=route)
        reservation = Reservation(self, usd, token)
        try:
            yield reservation
        finally:
            reservation.settle(0.0)  # no effect once settled

    async def acquire(
        self, usd: float, request: ModelRequest | None = None, *, route: str | None = None
    ) -> str | None:
        """Reserve ``usd`` (waiting while outstanding reservations may settle for less), or
        raise `BudgetExhausted`; the token returned goes back with `release`. `reserve` pairs
        the two; a budget kept elsewhere (a study's jobs on other machines) overrides them."""
        while True:
            if route is not None and route in self.distrusted:
                raise self._distrusted(route, request)
            if not self.closed and self._fits(usd):
                self.reserved_usd += usd
                self._outstanding += 1
                return None
            if self.closed or self._outstanding == 0:
                # waiters were woken by the release that left nothing outstanding: each
                # re-checks, finds the budget closed and is refused in turn
                closed_before, self.closed = self.closed, True
                raise self._refusal(usd, request, closed_before)
            if self._settled is None:
                self._settled = anyio.Event()
            await self._settled.wait()

    def _fits(self, usd: float) -> bool:
        if self.max_usd is None:
            return True
        committed = self.spent_usd + self.reserved_usd
        # nothing left refuses every call, unpriced ones included (a budget of 0 allows none)
        return committed < self.max_usd and committed + usd <= self.max_usd

    def release(self, reserved: float, cost: float, token: str | None = None) -> None:
        """Give back the reservation of ``reserved`` that `acquire` returned ``token`` for,
        and charge ``cost``."""
        self._outstanding -= 1
        # the sum of many additions and subtractions drifts: reset it when nothing is held
        self.reserved_usd = self.reserved_usd - reserved if self._outstanding else 0.0
        self.spent_usd += cost
        if self._settled is not None:
            self._settled.set()
            self._settled = None

    def _distrusted(self, route: str, request: ModelRequest | None) -> ProviderAnomaly:
        site = request.site if request is not None else None
        return ProviderAnomaly(
            self.distrusted[route],
            timeline=site.timeline if site else None,
            tick=site.tick if site else None,
        )

    def _refusal(
        self, usd: float, request: ModelRequest | None, closed_before: bool
    ) -> BudgetExhausted:
        site = request.site if request is not None else None
        limit = f"${self.max_usd:.4f}" if self.max_usd is not None else "the budget"
        why = (
            "an earlier call that did not fit closed it"
            if closed_before
            else f"the next call could cost up to ${usd:.4f}"
        )
        return BudgetExhausted(
            f"budget of {limit} reached: spent ${self.spent_usd:.4f}, {why}; {self.raised_by}",
            timeline=site.timeline if site else None,
            tick=site.tick if site else None,
        )


class Reservation:
    """One call's hold on a `Budget`; `settle` records what the call really cost."""

    def __init__(self, budget: Budget, usd: float, token: str | None = None) -> None:
        self.budget = budget
        self.usd = usd
        self.token = token
        self.cost_usd: float | None = None
        self.settled = False

    def settle(self, cost_usd: float | None) -> None:
        """Charge ``cost_usd`` (``None``: unpriced, charged nothing) and give back the rest.
        Later calls do nothing: a reservation is settled once."""
        if self.settled:
            return
        self.settled = True
        self.cost_usd = cost_usd
        self.budget.release(self.usd, cost_usd or 0.0, self.token)
