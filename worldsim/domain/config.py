"""A run's settings as one typed, serialisable value: :class:`RunConfig`.

The same value comes from ``worldsim run`` flags, from a YAML file (``worldsim run --config
run.yaml``) or from a plain dict (``RunConfig.from_dict``), and is recorded in the trace's
``run_started`` record. Secrets are never part of it: keys and base URLs are read from the
environment at run time.

In a mapping, ``card`` is a card file path or the card itself and ``policy`` a preset name, a
policy file path or the policy itself; relative paths in a config file are read from the file's
folder.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    StrictBool,
    StrictFloat,
    StrictInt,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from worldsim.domain import bounds
from worldsim.domain.cards import Card, UtcDatetime, load_card, utc_iso
from worldsim.domain.contracts import EXTRACTION_RULES
from worldsim.domain.errors import ConfigError
from worldsim.domain.files import first_error, load_mapping
from worldsim.domain.interventions import Intervention, check_against
from worldsim.domain.policy import BranchPolicy, load_policy, policy_file

__all__ = [
    "CONDITIONS",
    "DEFAULT_CONDITION",
    "DEFAULT_POLICY",
    "DEFAULT_TICKS",
    "GRAPH_CONDITIONS",
    "OUTPUT_MODES",
    "RETRIEVAL_CONDITIONS",
    "Condition",
    "ModelConfig",
    "RetrySettings",
    "RouteOptions",
    "RunConfig",
    "load_routes_file",
    "load_run_config",
    "resolve_paths",
]

DEFAULT_TICKS = 8
DEFAULT_POLICY = "branching"

_PATH_FIELDS = ("cache_dir", "prices", "forbidden_strings")

Condition = Literal["vanilla", "causal_simulation", "search", "search_graph", "near_resolution"]
CONDITIONS: tuple[Condition, ...] = (
    "vanilla",
    "causal_simulation",
    "search",
    "search_graph",
    "near_resolution",
)
"""The agent conditions (docs/experiments.md): which of retrieval and the forecast-time causal
graph a run's agents get. ``near_resolution`` is ``search_graph`` with the gateway cut off one
day before resolution."""
DEFAULT_CONDITION: Condition = "search_graph"
RETRIEVAL_CONDITIONS: frozenset[str] = frozenset({"search", "search_graph", "near_resolution"})
"""Conditions whose agents search the Temporal Gateway (so SrcP is defined)."""
GRAPH_CONDITIONS: frozenset[str] = frozenset(
    {"causal_simulation", "search_graph", "near_resolution"}
)
"""Conditions that build the forecast-time causal graph (so KER is defined)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_DAY_S = 86_400.0


class RetrySettings(_Frozen):
    """How hard a remote model call is tried: attempts, per-attempt timeout and backoff."""

    max_attempts: StrictInt = Field(5, ge=1, le=100)
    timeout_s: StrictFloat = Field(60.0, gt=0, le=_DAY_S)
    backoff_initial_s: StrictFloat = Field(0.5, ge=0, le=_DAY_S)
    backoff_max_s: StrictFloat = Field(30.0, ge=0, le=_DAY_S)
    jitter_s: StrictFloat = Field(1.0, ge=0, le=_DAY_S)
    retry_after_cap_s: StrictFloat = Field(60.0, ge=0, le=_DAY_S)


OUTPUT_MODES = ("json_schema", "json_object", "text")
"""How a route's replies are constrained, in the order negotiation tries them (``prompted`` is
accepted as another name for ``text``: no response format, the schema in the prompt)."""

_OutputModeName = Literal["json_schema", "json_object", "text", "tools", "prompted"]


class RoutePrice(_Frozen):
    """USD per million tokens, for a route the shipped price table does not know."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)


class RouteOptions(_Frozen):
    """Settings of one route, overriding the run's: the ``routes:`` block of a run config (and
    of a study manifest), or a routes file (``--routes FILE``), keyed by route name.

    Every field is optional; an unset one keeps the run-wide value. A local server that needs
    minutes per call wants a long ``timeout_s`` (time without a token, not total time), few
    ``max_attempts``, ``max_connections`` near its parallel slots, and perhaps ``output_mode:
    text`` when grammar-constrained decoding is much slower than free text.
    """

    timeout_s: float | None = Field(None, gt=0, le=_DAY_S)
    """Seconds without progress (no streamed token; no reply when the server does not
    stream) before an attempt is given up."""
    max_attempts: int | None = Field(None, ge=1, le=100)
    max_connections: int | None = Field(None, ge=1, le=1024)
    output_mode: _OutputModeName | tuple[_OutputModeName, ...] | None = None
    """One mode to force, or the order negotiation tries them in."""
    max_tokens_scale: float | None = Field(None, gt=0, le=100)
    """Every role's ``max_tokens`` on this route is multiplied by this (rounded up)."""
    temperature: float | None = Field(None, ge=0, le=2)
    """Sent instead of each role's temperature."""
    price: RoutePrice | None = None
    stream: bool | None = None
    """Stream replies (default: yes; a server that refuses is asked without)."""
    local: bool | None = None
    """A timeout raises the next attempt's limit instead of resending the same request
    (default: yes for local providers and loopback base URLs)."""
    preflight: bool | None = None
    """Measure the route briefly before a run's first call on it (``False``: never)."""

    @field_validator("output_mode")
    @classmethod
    def _some_mode(cls, value: object) -> object:
        if value == ():
            raise ValueError("output_mode needs at least one mode")
        return value

    @property
    def output_modes(self) -> tuple[str, ...] | None:
        """The negotiation order, ``prompted`` spelt ``text``; ``None`` when not set."""
        if self.output_mode is None:
            return None
        modes = (self.output_mode,) if isinstance(self.output_mode, str) else self.output_mode
        return tuple(dict.fromkeys("text" if m == "prompted" else m for m in modes))


class ModelConfig(_Frozen):
    """How model routes are reached: routes, cache, limits, budget, prices and leakage guard."""

    model: str = "offline"
    role_models: tuple[str, ...] = ()
    """``ROLE=ROUTE`` entries, as ``--role-model`` takes them."""
    max_connections: StrictInt = Field(8, ge=1, le=bounds.MAX_CONNECTIONS)
    cache: Literal["use", "refresh", "off"] = "use"
    cache_dir: Path | None = None
    """The response cache's folder (default: `worldsim.models.cache.default_cache_dir`)."""
    replay_strict: StrictBool = False
    max_cost_usd: StrictFloat | None = Field(None, ge=0)
    prices: Path | None = None
    forbidden_strings: Path | None = None
    leakage: Literal["record", "fail"] = "record"
    retry: RetrySettings | None = None
    routes: dict[str, RouteOptions] = Field(default_factory=dict)
    """Per-route settings, keyed by route name (``local/smollm2``); see `RouteOptions`."""
    deadline_s: float | None = Field(None, gt=0, le=30 * _DAY_S)
    """Wall-clock seconds the run's model calls may take in all: no attempt starts, or goes
    on, past it. Bounds retries after timeouts by time rather than by luck."""

    @field_validator("cache_dir", "prices", "forbidden_strings")
    @classmethod
    def _absolute(cls, path: Path | None) -> Path | None:
        """A file's absolute path, so that the trace that records it names the same file to a
        resume started in any folder."""
        return None if path is None else path.expanduser().absolute()

    @field_validator("replay_strict")
    @classmethod
    def _strict_reads_the_cache(cls, strict: bool, info: ValidationInfo) -> bool:
        cache = info.data.get("cache")
        if strict and cache is not None and cache != "use":
            raise ValueError(
                f"a strict replay reads the response cache: it needs cache 'use', not '{cache}'"
            )
        return strict


class RunConfig(_Frozen):
    """Everything that determines a run's result: the card, the policy, the seed, the roles and
    the models. Where the trace goes is not part of it."""

    card: Card
    policy: BranchPolicy
    kind: Literal["multiverse", "direct"] = "multiverse"
    """``direct`` is the direct baseline (``worldsim forecast``): one call, no world."""
    seed: StrictInt = Field(0, ge=0, le=bounds.MAX_SEED)
    ticks: StrictInt | None = Field(None, ge=1, le=bounds.MAX_TICKS)
    extraction_rule: str = EXTRACTION_RULES[0]
    """One of ``EXTRACTION_RULES``."""
    method: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=120)
    """The method label (default: the policy's name); part of the trace's file name, so one
    plain name: letters, digits, ``_``, ``.``, ``-``."""
    roles: dict[str, str] = Field(default_factory=dict)
    """Slot overrides: which role plays ``initializer``, ``governance``, ``reporter`` or a tick
    role named in the card's seeds."""
    extra_roles: tuple[str, ...] = ()
    """Roles added to this run (``--role``), beside the card's and the policy's ``roles:``."""
    card_path: Path | None = None
    """The card's file, where it came from one: absolute, so that what the card names relative
    to its folder (an evidence database) is found from any folder a resume or continuation
    runs in."""
    policy_path: Path | None = Field(None, exclude=True)
    """The policy's file, where it came from one (errors name it); not recorded."""
    models: ModelConfig = Field(default_factory=ModelConfig)
    forecast_date: UtcDatetime | None = None
    """The simulated "today" (default: the card's as_of): the world starts here, the prompts
    say so and the gateway is cut off here. The card itself, as_of included, is recorded
    unchanged."""
    condition: Condition = DEFAULT_CONDITION
    """Which tools the agents get: retrieval through the gateway, the forecast graph, both or
    neither (see ``CONDITIONS``)."""
    resolves_at: UtcDatetime | None = None
    """When the question resolved, if known (a label's ``resolved_at``): the ``near_resolution``
    condition cuts the gateway off one day before it (else one day before the deadline)."""
    interventions: tuple[Intervention, ...] = Field((), max_length=100)
    """Changes made to the world at given dates (see `Intervention`)."""

    @field_serializer("card")
    def _card_data(self, card: Card, info: SerializationInfo) -> dict[str, Any]:
        made = info.context.get("card") if isinstance(info.context, dict) else None
        return made if made is not None else card.public_dict()

    @model_validator(mode="after")
    def _check_dates(self) -> RunConfig:
        card = self.card
        if self.forecast_date is not None:
            if not card.as_of <= self.forecast_date < card.deadline:
                raise ValueError(
                    f"forecast_date {self.forecast_date.isoformat()} is outside the card's "
                    f"window [{card.as_of.isoformat()}, {card.deadline.isoformat()})"
                )
            if self.forecast_date == card.as_of:  # the same run as without the override
                object.__setattr__(self, "forecast_date", None)
        return self

    @field_validator("card_path")
    @classmethod
    def _absolute_card_path(cls, path: Path | None) -> Path | None:
        return None if path is None else path.absolute()

    @field_validator("extraction_rule")
    @classmethod
    def _check_extraction_rule(cls, rule: str) -> str:
        if rule not in EXTRACTION_RULES:
            raise ValueError(
                f"unknown extraction rule '{rule}' (known: {', '.join(EXTRACTION_RULES)})"
            )
        return rule

    @field_validator("interventions")
    @classmethod
    def _check_interventions(
        cls, interventions: tuple[Intervention, ...], info: ValidationInfo
    ) -> tuple[Intervention, ...]:
        card = info.data.get("card")
        if not isinstance(card, Card):
            return interventions  # the card's own error is reported
        forecast_date = info.data.get("forecast_date")
        start = forecast_date if isinstance(forecast_date, datetime) else card.as_of
        check_against(interventions, card, start)
        return interventions

    @property
    def world_card(self) -> Card:
        """The card as the simulation sees it: its as_of moved to the forecast date, so the
        world's calendar, the prompts' "today" and the gateway cut-off all follow it."""
        if self.forecast_date is None:
            return self.card
        return self.card.model_copy(update={"as_of": self.forecast_date})

    @property
    def retrieval(self) -> bool:
        """Whether the agents search the Temporal Gateway (the condition allows it)."""
        return self.condition in RETRIEVAL_CONDITIONS

    @property
    def graph(self) -> bool:
        """Whether the condition builds the forecast-time causal graph (so KER is defined)."""
        return self.condition in GRAPH_CONDITIONS

    @property
    def gateway_cutoff(self) -> datetime:
        """The gateway's cut-off: the simulated today, or for ``near_resolution`` one day
        before the resolution (the deadline when it is not known)."""
        if self.condition == "near_resolution":
            return (self.resolves_at or self.card.deadline) - timedelta(days=1)
        return self.world_card.as_of

    @property
    def effective_ticks(self) -> int:
        return self.ticks or self.policy.ticks or DEFAULT_TICKS

    @property
    def added_roles(self) -> tuple[str, ...]:
        """Every role added to the run, once each: the card's ``roles:``, the policy's, then
        ``extra_roles``. A tick role acts as its own agent on every timeline; an init, review
        or report role takes that phase's slot."""
        return tuple(dict.fromkeys((*self.card.roles, *self.policy.roles, *self.extra_roles)))

    @property
    def method_label(self) -> str:
        return self.method or ("direct" if self.kind == "direct" else self.policy.name)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Build a config from plain data (a parsed YAML file, a study's method, a trace header).

        ``card`` may be a path or a mapping, ``policy`` a preset name, a path or a mapping
        (``branching`` when absent). An invalid value raises :class:`ConfigError` naming the
        field.
        """
        data = dict(data)
        card = data.get("card")
        if isinstance(card, str | Path):
            data["card"] = load_card(card)
            data.setdefault("card_path", card)
        elif card is None:
            raise ConfigError("missing card", field="card")
        policy = data.get("policy", DEFAULT_POLICY)
        if isinstance(policy, str | Path):
            data["policy"] = load_policy(policy)
            data.setdefault("policy_path", policy_file(policy))
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            field, message = first_error(exc)
            raise ConfigError(message, field=field) from None

    def started_fields(self) -> dict[str, str]:
        """The trace header's ``forecast_date`` and ``condition``, given only when they differ
        from a plain run's, so a plain run's header is what it always was."""
        out: dict[str, str] = {}
        if self.forecast_date is not None:
            out["forecast_date"] = utc_iso(self.forecast_date)
        if self.condition != DEFAULT_CONDITION:
            out["condition"] = self.condition
        return out

    def to_dict(self, card: dict[str, Any] | None = None) -> dict[str, Any]:
        """The config as JSON-ready data; ``RunConfig.from_dict`` reads it back unchanged.
        ``card``: the card's :meth:`~Card.public_dict` where it is made already (a card of
        10⁵ actors costs a fifth of a second to dump).

        The date and condition fields appear only when set, so a run without them records
        exactly what it did before they existed."""
        data = self.model_dump(mode="json", context={"card": card})
        for name in ("forecast_date", "resolves_at"):
            if data[name] is None:
                del data[name]
        if self.condition == DEFAULT_CONDITION:
            del data["condition"]
        return data


def _resolve(value: str, base: Path) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def resolve_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Run config data with its relative paths (card, policy file, model files) read against
    ``base``, the folder of the file that gave them."""
    data = dict(data)
    for key in ("card", "card_path"):
        if isinstance(data.get(key), str):
            data[key] = _resolve(data[key], base)
    policy = data.get("policy")
    if isinstance(policy, str) and Path(policy).suffix in {".yaml", ".yml", ".json"}:
        data["policy"] = _resolve(policy, base)
    models = data.get("models")
    if isinstance(models, dict):
        data["models"] = {
            key: _resolve(value, base) if key in _PATH_FIELDS and isinstance(value, str) else value
            for key, value in models.items()
        }
    return data


def load_run_config(path: str | Path) -> dict[str, Any]:
    """Read a run config file (YAML or JSON) into data for :meth:`RunConfig.from_dict`, with
    relative paths made relative to the file's folder; a problem names the file."""
    file = Path(path)
    data = load_mapping(file, what="run config", error=ConfigError)
    return resolve_paths(data, file.parent)


_ROUTES = TypeAdapter(dict[str, RouteOptions])


def load_routes_file(path: str | Path) -> dict[str, RouteOptions]:
    """Read a routes file: a YAML or JSON mapping whose ``routes:`` key holds route name →
    `RouteOptions`, the same block a run config takes. A problem names the file and field."""
    file = Path(path)
    data = load_mapping(file, what="routes file", error=ConfigError)
    unknown = sorted(set(data) - {"routes"})
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} (a routes file holds 'routes:')", file=file)
    try:
        return _ROUTES.validate_python(data.get("routes") or {})
    except ValidationError as exc:
        field, message = first_error(exc)
        raise ConfigError(message, file=file, field=f"routes.{field}") from None
