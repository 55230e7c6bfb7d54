"""The options that commands share, declared once, and the one way they become a `RunConfig`.

`run_config` turns what a command was given — its typed options, a ``--config`` file, the
settings a resumed trace recorded — into one typed, validated `RunConfig`; every cross-field
rule is a validator of `RunConfig` or `ModelConfig`, so the library refuses what the command
line refuses.
"""

# No `from __future__ import annotations` here: typer reads these aliases at start-up, and
# string annotations would be parsed again each time. Names imported only for type checking are
# quoted.

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from worldsim.domain.errors import ConfigError

if TYPE_CHECKING:
    from worldsim.domain.cards import Card
    from worldsim.domain.config import RunConfig

__all__ = [
    "CacheDirOption",
    "CacheOption",
    "DeadlineOption",
    "ForbiddenStringsOption",
    "LeakageOption",
    "MaxAttemptsOption",
    "MaxConnectionsOption",
    "MaxCostOption",
    "PreflightOption",
    "PricesOption",
    "ReplayStrictOption",
    "RoleModelOption",
    "RoutesOption",
    "TimeoutOption",
    "given_options",
    "recorded_settings",
    "run_config",
    "typed_flag",
    "with_model_options",
]

RoleModelOption = Annotated[
    list[str] | None,
    typer.Option(
        metavar="ROLE=ROUTE",
        help="The route of one role (repeatable), e.g. cohort=openai/gpt-4o-mini.",
    ),
]
MaxConnectionsOption = Annotated[
    int, typer.Option(min=1, help="Concurrent requests per route, shared by all timelines.")
]
CacheOption = Annotated[
    str, typer.Option(metavar="use|refresh|off", help="Response cache: use, refresh or off.")
]
CacheDirOption = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        metavar="DIR",
        help="The response cache's folder (default: $WORLDSIM_CACHE_DIR, else "
        "$XDG_CACHE_HOME/worldsim, else ~/.cache/worldsim).",
    ),
]
ReplayStrictOption = Annotated[
    bool,
    typer.Option(
        help="Answer from the response cache only: a miss is an error, no model is called "
        "(needs --cache use)."
    ),
]
MaxCostOption = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        metavar="USD",
        help="Never spend more: each call reserves its worst case first, and the run stops "
        "cleanly, resumable, when the next one does not fit, or when a reply reports more "
        "usage than its request could cost (a provider anomaly, docs/models.md). The cap is "
        "the command's: run --replicates spend from one. With run --resume, the cap of the "
        "whole run, counting what its trace already spent (default: the recorded cap).",
    ),
]
PricesOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="Price table (YAML) whose entries replace or add to the shipped table's (with run "
        "--resume, default: the recorded one).",
    ),
]
ForbiddenStringsOption = Annotated[
    Path | None,
    typer.Option(metavar="FILE", help="Strings no prompt or reply may contain, one per line."),
]
LeakageOption = Annotated[
    str,
    typer.Option(metavar="record|fail", help="On a forbidden string: record it, or fail."),
]
RoutesOption = Annotated[
    Path | None,
    typer.Option(
        "--routes",
        metavar="FILE",
        help="Per-route settings (timeout, attempts, connections, output mode, max_tokens "
        "scale, temperature, price): a YAML file with a routes: block, as in --config.",
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        min=0.001,
        metavar="S",
        help="Seconds without progress (no token streamed) before an attempt is given up "
        "(default 60; a local route doubles it after each timeout).",
    ),
]
MaxAttemptsOption = Annotated[
    int | None, typer.Option(min=1, metavar="N", help="Attempts per request (default 5).")
]
DeadlineOption = Annotated[
    float | None,
    typer.Option(
        min=0.001,
        metavar="S",
        help="Wall-clock seconds for the model calls: no attempt starts or goes on past it.",
    ),
]
PreflightOption = Annotated[
    bool | None,
    typer.Option(
        help="Measure each remote route briefly first (default: on a terminal, once per "
        "route; see `worldsim models check`)."
    ),
]

_MODEL_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("cache", CacheOption, "use"),
    ("cache_dir", CacheDirOption, None),
    ("replay_strict", ReplayStrictOption, False),
    ("max_cost_usd", MaxCostOption, None),
    ("prices", PricesOption, None),
    ("forbidden_strings", ForbiddenStringsOption, None),
    ("leakage", LeakageOption, "record"),
    ("routes_file", RoutesOption, None),
    ("timeout", TimeoutOption, None),
    ("max_attempts", MaxAttemptsOption, None),
    ("deadline", DeadlineOption, None),
    ("preflight", PreflightOption, None),
)
"""The options of every command that calls models, beyond the route: name, declaration, default."""

Command = TypeVar("Command", bound=Callable[..., None])


def with_model_options(command: Command) -> Command:
    """``command`` with the model options (`_MODEL_OPTIONS`) after its own, declared here once
    for every command that calls models; it takes them as ``**options`` (by name, as typer
    passes them) and reads what the user typed with `given_options`."""
    signature = inspect.signature(command)
    own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=alias, default=default)
        for name, alias, default in _MODEL_OPTIONS
    ]
    command.__signature__ = signature.replace(parameters=[*own, *shared])  # type: ignore[attr-defined]
    return command


_RUN_FIELDS = {
    "policy": "policy",
    "seed": "seed",
    "ticks": "ticks",
    "extraction": "extraction_rule",
    "method_label": "method",
}
"""Command option → `RunConfig` field."""
_MODEL_FIELDS = {
    "model": "model",
    "role_model": "role_models",
    "max_connections": "max_connections",
    "cache": "cache",
    "cache_dir": "cache_dir",
    "replay_strict": "replay_strict",
    "max_cost_usd": "max_cost_usd",
    "prices": "prices",
    "forbidden_strings": "forbidden_strings",
    "leakage": "leakage",
}
"""Command option → `ModelConfig` field."""


def given_options(ctx: typer.Context) -> dict[str, Any]:
    """The options the user typed on the command line (not their defaults), by name."""
    given: dict[str, Any] = {}
    for name, value in ctx.params.items():
        source = ctx.get_parameter_source(name)
        if source is not None and source.name not in {"DEFAULT", "DEFAULT_MAP"}:
            given[name] = value
    return given


def recorded_settings(trace: Path) -> dict[str, Any]:
    """The settings the run in ``trace`` recorded in its first record (``run_started``), as
    data for `run_config`; empty when there are none to read (the resume then says why)."""
    from worldsim.trace.reader import iter_trace

    if not trace.is_file():
        return {}
    try:
        first = next(iter_trace(trace), None)  # only the header is read here
    except ConfigError:
        return {}
    config = getattr(first.data, "config", None) if first is not None else None
    if first is None or first.type != "run_started" or not isinstance(config, dict):
        return {}
    return dict(config)


def _models(data: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a run's ``models`` settings) with the model options folded in: a routes
    file's entries replace the same routes' entries, ``--timeout`` and ``--max-attempts`` set
    the run-wide retry settings, ``--deadline`` the deadline."""
    from worldsim.domain.config import load_routes_file

    models = dict(data)
    for option, name in _MODEL_FIELDS.items():
        if option in options:
            value = options[option]
            models[name] = tuple(value or ()) if option == "role_model" else value
    if options.get("routes_file") is not None:
        loaded = {
            k: v.model_dump(exclude_none=True)
            for k, v in load_routes_file(options["routes_file"]).items()
        }
        models["routes"] = {**dict(models.get("routes") or {}), **loaded}
    retry = dict(models.get("retry") or {})
    if options.get("timeout") is not None:
        retry["timeout_s"] = options["timeout"]
    if options.get("max_attempts") is not None:
        retry["max_attempts"] = options["max_attempts"]
    if retry:
        models["retry"] = retry
    if options.get("deadline") is not None:
        models["deadline_s"] = options["deadline"]
    return models


def run_config(
    options: Mapping[str, Any],
    *,
    card: "Card | Path | None" = None,
    base: Mapping[str, Any] | None = None,
    source: Path | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> "RunConfig":
    """The run's settings: ``base`` (a ``--config`` file's data, or the settings a resumed
    trace recorded, read from ``source``), with every option in ``options`` (name → value, as
    the command declares them) taking precedence, then ``fixed`` (what the command itself
    decides, such as ``kind``). ``card`` is the card file (loaded here) or the card itself.

    A bad value is a `ConfigError` naming the field, and ``source`` when the value came from it.
    """
    from worldsim.domain.cards import Card, load_card
    from worldsim.domain.config import RunConfig

    data = dict(base or {})
    for option, name in _RUN_FIELDS.items():
        if option in options:
            data[name] = options[option]
    data["models"] = _models(data.get("models") or {}, options)
    if options.get("role"):
        data["extra_roles"] = (*data.get("extra_roles", ()), *options["role"])
    if isinstance(card, Path):
        data["card"], data["card_path"] = load_card(card), card
    elif isinstance(card, Card):
        data["card"] = card
    data.update(fixed or {})
    try:
        return RunConfig.from_dict(data)
    except ConfigError as exc:
        if exc.file is not None:
            raise
        flag = typed_flag(exc.field, options)
        if flag is not None:  # the value the user typed: named as they typed it
            raise ConfigError(exc.message, field=flag) from None
        if source is None:
            raise
        partner = typed_flag(_READS.get(exc.field or ""), options)
        if partner is not None:  # a typed option broke a rule the source's field holds to
            raise ConfigError(f"{exc.message} ({source} sets {exc.field})", field=partner) from None
        raise ConfigError(exc.message, file=source, field=exc.field) from None


_READS = {"models.replay_strict": "models.cache"}
"""A settings field whose rule reads another field → that field: when only the other one was
typed, the typed option is what broke the rule."""


def typed_flag(field: str | None, options: Mapping[str, Any]) -> str | None:
    """The command-line option behind the settings field ``field`` (``models.cache`` →
    ``--cache``), when the user typed it; None otherwise."""
    if field is None:
        return None
    fields = [*_RUN_FIELDS.items(), *((k, f"models.{v}") for k, v in _MODEL_FIELDS.items())]
    for option, name in fields:
        if option in options and any(
            field == known or field.startswith(f"{known}.") for known in (name, option)
        ):
            return "--" + option.replace("_", "-")
    return None
