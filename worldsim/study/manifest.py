"""A study's manifest: cards × methods × forecast dates × seeds, validated whole before anything
runs (docs/experiments.md).

A method is a run config (``run:``, the keys of a ``RunConfig`` with the model settings beside
them, as in ``worldsim run --config``) or a direct-baseline config (``forecast:``, a route and
optionally a role). Every problem — an unknown card, a glob that matches nothing, a duplicate
or unsafe label, an unknown policy, role or route, a bad forecast date — is one
:class:`ConfigError` naming the manifest file and the field.
"""

from __future__ import annotations

import glob
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from worldsim.domain import bounds
from worldsim.domain.cards import Card, card_hash, load_card
from worldsim.domain.config import ModelConfig, RunConfig, resolve_paths
from worldsim.domain.errors import ConfigError
from worldsim.domain.files import first_error, load_mapping
from worldsim.domain.jsonbytes import canonical_ascii_bytes
from worldsim.domain.values import FrozenModel
from worldsim.models.routes import resolve_settings
from worldsim.sim.direct import direct_request
from worldsim.sim.plan import role_plan, route_table, with_role_routes
from worldsim.study.dates import check_date_name

__all__ = ["Manifest", "Method", "MethodSpec", "Study", "load_study"]

SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
"""A label or name that is one plain file-name part: letters, digits, ``_``, ``.``, ``-``."""
_SET_BY_STUDY = ("card", "card_path", "seed", "forecast_date", "resolves_at", "kind", "method")
_MODEL_KEYS = frozenset(ModelConfig.model_fields)


class MethodSpec(FrozenModel):
    """One method as the manifest gives it: a label and either ``run`` or ``forecast``."""

    label: str = Field(pattern=SAFE_NAME, max_length=80)
    run: dict[str, Any] | None = None
    forecast: dict[str, Any] | None = None
    rolling: bool = False
    """Chain the study's forecast dates in time order per (card, method, seed): each date's job
    continues the one before it (``run --continue``) instead of starting again."""


class Manifest(FrozenModel):
    """The manifest file's content."""

    name: str = Field(pattern=SAFE_NAME, max_length=120)
    cards: list[str] = Field(min_length=1)
    seeds: list[int] = Field([0], min_length=1)
    forecast_dates: list[str] = Field(["card"], min_length=1)
    methods: list[MethodSpec] = Field(min_length=1)
    max_connections: int | None = Field(None, ge=1)
    """Concurrent requests per route, for every method that does not set its own."""
    max_cost_usd: float | None = Field(None, ge=0)
    """One budget for the whole study, shared by every run and continued on a rerun."""
    max_parallel_jobs: int = Field(4, ge=1, le=256)


@dataclass(frozen=True, slots=True)
class Method:
    """A validated method: its label, kind and the run config data every job starts from."""

    label: str
    kind: Literal["multiverse", "direct"]
    data: dict[str, Any]
    rolling: bool = False

    def config(self, card: Card, card_path: Path) -> RunConfig:
        return RunConfig.from_dict({**self.data, "card": card, "card_path": card_path})


@dataclass(frozen=True, slots=True)
class Study:
    """A validated manifest: its cards loaded, its methods checked against every card."""

    path: Path
    manifest: Manifest
    cards: tuple[tuple[Card, Path], ...]
    methods: tuple[Method, ...]
    sha256: str

    @property
    def name(self) -> str:
        return self.manifest.name


def _error(path: Path, field: str, message: str) -> ConfigError:
    return ConfigError(message, file=path, field=field)


def _check_jobs(manifest: Manifest, cards: int, path: Path) -> None:
    """Refuse a study of more than ``bounds.MAX_STUDY_JOBS`` jobs, naming the limit."""
    sizes = (cards, len(manifest.methods), len(manifest.forecast_dates), len(manifest.seeds))
    jobs = math.prod(sizes)
    if jobs > bounds.MAX_STUDY_JOBS:
        raise ConfigError(
            f"{jobs:,} jobs (cards × methods × forecast_dates × seeds: "
            f"{' × '.join(f'{n:,}' for n in sizes)}), over the limit of "
            f"{bounds.MAX_STUDY_JOBS:,} (MAX_STUDY_JOBS, docs/limits.md)",
            file=path,
        )


def _cards(manifest: Manifest, path: Path) -> tuple[tuple[Card, Path], ...]:
    base = path.parent
    found: dict[str, tuple[Card, Path]] = {}
    for i, pattern in enumerate(manifest.cards):
        full = Path(pattern).expanduser()
        full = full if full.is_absolute() else base / full
        if glob.has_magic(pattern):
            files = sorted(Path(f) for f in glob.glob(str(full), recursive=True))
            files = [f for f in files if f.is_file() and f.resolve() != path.resolve()]
            if not files:
                raise _error(path, f"cards.{i}", f"'{pattern}' matches no card file")
        elif full.is_file():
            files = [full]
        else:
            raise _error(path, f"cards.{i}", f"card file '{pattern}' not found")
        for file in files:
            try:
                card = load_card(file)
            except ConfigError as exc:
                raise _error(path, f"cards.{i}", str(exc)) from None
            seen = found.get(card.id)
            if seen is not None and seen[1].resolve() != file.resolve():
                raise _error(path, f"cards.{i}", f"card id '{card.id}' is also the id of {seen[1]}")
            found[card.id] = (card, file)
    return tuple(found[key] for key in sorted(found))


def _method_data(spec: MethodSpec, index: int, manifest: Manifest, path: Path) -> Method:
    where = f"methods.{index}"
    if (spec.run is None) == (spec.forecast is None):
        raise _error(path, where, "give a method either 'run' or 'forecast'")
    if spec.rolling and spec.forecast is not None:
        raise _error(
            path, f"{where}.rolling", "a forecast method cannot be rolling (it has no timelines)"
        )
    if spec.rolling and (spec.run or {}).get("condition") == "near_resolution":
        raise _error(
            path, f"{where}.rolling", "a near_resolution method sees past its date: not rolling"
        )
    kind: Literal["multiverse", "direct"] = "multiverse" if spec.run is not None else "direct"
    part = "run" if kind == "multiverse" else "forecast"
    given = dict(spec.run if spec.run is not None else spec.forecast or {})
    for key in _SET_BY_STUDY:
        if key in given:
            raise _error(path, f"{where}.{part}.{key}", f"'{key}' is set by the study")
    models = {key: given.pop(key) for key in list(given) if key in _MODEL_KEYS}
    if manifest.max_connections is not None:
        models.setdefault("max_connections", manifest.max_connections)
    data: dict[str, Any]
    if kind == "direct":
        role = given.pop("role", None)
        if given:
            raise _error(path, f"{where}.forecast.{sorted(given)[0]}", "unknown field")
        data = {"kind": "direct", "roles": {"direct": role} if role else {}}
    else:
        data = given
    data.update(method=spec.label, models=models)
    return Method(spec.label, kind, resolve_paths(data, path.parent), spec.rolling)


def _field_of(exc: ConfigError, part: str) -> str:
    field = (exc.field or "").removeprefix("models.").lstrip("-")
    return {"role-model": "role_models", "": part}.get(field, field)


def _check_method(
    method: Method,
    index: int,
    study_cards: tuple[tuple[Card, Path], ...],
    path: Path,
    environ: Mapping[str, str] | None,
) -> None:
    """Build the method's run config for every card and check its roles and routes, so that
    nothing fails later for a reason the manifest could have shown."""
    part = "run" if method.kind == "multiverse" else "forecast"
    where = f"methods.{index}.{part}"
    for card, card_path in study_cards:
        try:
            config = method.config(card, card_path)
            if method.kind == "multiverse":
                config = with_role_routes(config, role_plan(config))
            else:
                direct_request(card, role_name=config.roles.get("direct") or None)
        except ConfigError as exc:
            field = _field_of(exc, part)
            message = exc.message if exc.file is None else str(exc)
            raise _error(path, f"{where}.{field}", f"{message} (card '{card.id}')") from None
        try:
            for route in route_table(config.models).routes():
                if not route.is_offline:
                    resolve_settings(route, environ=environ)
        except ConfigError as exc:
            field = "role_models" if exc.field == "--role-model" else "model"
            raise _error(path, f"{where}.{field}", exc.message) from None


_HOW_IT_RUNS = frozenset({"max_connections", "max_cost_usd", "max_parallel_jobs"})
"""Manifest fields that say how the study runs, not what it computes: a rerun may change them
(a larger budget goes on with `--retry-failed`)."""


def _sha256(manifest: Manifest, cards: tuple[tuple[Card, Path], ...]) -> str:
    """The study's identity: the manifest's content but how it runs (`_HOW_IT_RUNS`), and the
    content of every card it names."""
    identity = {
        "manifest": manifest.model_dump(mode="json", exclude=set(_HOW_IT_RUNS)),
        "cards": {card.id: card_hash(card) for card, _ in cards},
    }
    return hashlib.sha256(canonical_ascii_bytes(identity)).hexdigest()


def load_study(path: str | Path, *, environ: Mapping[str, str] | None = None) -> Study:
    """Read and validate a manifest whole: every card, method and date; nothing is written.

    ``environ`` replaces the environment where the routes' base URLs and keys are looked up.
    """
    file = Path(path)
    data = load_mapping(file, what="study manifest", error=ConfigError)
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise _error(file, field, message) from None
    labels: dict[str, int] = {}
    for i, spec in enumerate(manifest.methods):
        if spec.label in labels:
            raise _error(
                file,
                f"methods.{i}.label",
                f"duplicate label '{spec.label}' (methods.{labels[spec.label]})",
            )
        labels[spec.label] = i
    if len(set(manifest.seeds)) != len(manifest.seeds) or min(manifest.seeds) < 0:
        raise _error(file, "seeds", "seeds must be distinct and not negative")
    if len(manifest.seeds) > bounds.MAX_STUDY_SEEDS:
        raise _error(
            file,
            "seeds",
            f"{len(manifest.seeds):,} seeds, over the limit of {bounds.MAX_STUDY_SEEDS:,} "
            "(MAX_STUDY_SEEDS, docs/limits.md)",
        )
    for i, name in enumerate(manifest.forecast_dates):
        try:
            check_date_name(name)
        except ValueError as exc:
            raise _error(file, f"forecast_dates.{i}", str(exc)) from None
    if len(set(manifest.forecast_dates)) != len(manifest.forecast_dates):
        raise _error(file, "forecast_dates", "a forecast date is listed twice")
    cards = _cards(manifest, file)
    _check_jobs(manifest, len(cards), file)
    methods = tuple(
        _method_data(spec, i, manifest, file) for i, spec in enumerate(manifest.methods)
    )
    for i, method in enumerate(methods):
        _check_method(method, i, cards, file, environ)
    return Study(file, manifest, cards, methods, _sha256(manifest, cards))
