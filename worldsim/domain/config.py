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

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer

from worldsim.domain.cards import Card, load_card
from worldsim.domain.errors import ConfigError
from worldsim.domain.files import first_error, load_mapping
from worldsim.domain.policy import BranchPolicy, load_policy

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_TICKS",
    "ModelConfig",
    "RetrySettings",
    "RunConfig",
    "load_run_config",
]

DEFAULT_TICKS = 8
DEFAULT_POLICY = "branching"

_PATH_FIELDS = ("cache_path", "prices", "forbidden_strings")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrySettings(_Frozen):
    """How hard a remote model call is tried: attempts, per-attempt timeout and backoff."""

    max_attempts: int = Field(5, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    backoff_initial_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    jitter_s: float = Field(1.0, ge=0)
    retry_after_cap_s: float = Field(60.0, ge=0)


class ModelConfig(_Frozen):
    """How model routes are reached: routes, cache, limits, budget, prices and leakage guard."""

    model: str = "offline"
    role_models: tuple[str, ...] = ()
    """``ROLE=ROUTE`` entries, as ``--role-model`` takes them."""
    max_connections: int = Field(8, ge=1)
    cache: Literal["use", "refresh", "off"] = "use"
    cache_path: Path | None = None
    replay_strict: bool = False
    max_cost_usd: float | None = Field(None, ge=0)
    prices: Path | None = None
    forbidden_strings: Path | None = None
    leakage: Literal["record", "fail"] = "record"
    retry: RetrySettings | None = None


class RunConfig(_Frozen):
    """Everything that determines a run's result: the card, the policy, the seed, the roles and
    the models. Where the trace goes is not part of it."""

    card: Card
    policy: BranchPolicy
    kind: Literal["multiverse", "direct"] = "multiverse"
    """``direct`` is the direct baseline (``worldsim forecast``): one call, no world."""
    seed: int = Field(0, ge=0)
    ticks: int | None = Field(None, ge=1, le=10_000)
    extraction_rule: str = "path-ledger/1"
    method: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=120)
    """The method label (default: the policy's name); part of the trace's file name, so one
    plain name: letters, digits, ``_``, ``.``, ``-``."""
    roles: dict[str, str] = Field(default_factory=dict)
    """Slot overrides: which role plays ``initializer``, ``governance``, ``reporter`` or a tick
    role named in the card's seeds."""
    extra_roles: tuple[str, ...] = ()
    """Roles added to this run (``--role``), beside the card's and the policy's ``roles:``."""
    card_path: Path | None = None
    models: ModelConfig = Field(default_factory=ModelConfig)

    @field_serializer("card")
    def _card_data(self, card: Card) -> dict[str, Any]:
        return card.public_dict()

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
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            field, message = first_error(exc)
            raise ConfigError(message, field=field) from None

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data; ``RunConfig.from_dict`` reads it back unchanged."""
        return self.model_dump(mode="json")


def _resolve(value: str, base: Path) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def load_run_config(path: str | Path) -> dict[str, Any]:
    """Read a run config file (YAML or JSON) into data for :meth:`RunConfig.from_dict`, with
    relative paths made relative to the file's folder; a problem names the file."""
    file = Path(path)
    data = load_mapping(file, what="run config", error=ConfigError)
    base = file.parent
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
