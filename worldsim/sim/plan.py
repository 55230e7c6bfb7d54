"""Which role plays each part of a run, and the model each one is built with.

A run has three one-per-phase slots (initializer, governance, reporter) and one tick role per
agent role its world names; ``--role`` adds roles. The plan is checked before anything runs,
and so is the run's size: a run whose trace could outgrow the documented limit refuses to start
(:func:`check_run_size`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Protocol

from worldsim.domain import bounds
from worldsim.domain.config import DEFAULT_CONDITION, DEFAULT_TICKS, ModelConfig, RunConfig
from worldsim.domain.contracts import Model
from worldsim.domain.errors import ConfigError, RoleError
from worldsim.domain.jsonbytes import canonical_ascii_bytes
from worldsim.models import RouteTable
from worldsim.models.routes import parse_route
from worldsim.models.tracing import Emit, traced
from worldsim.roles.registry import RoleSpec, get_role, registered_roles
from worldsim.world.build import world_seeds

__all__ = [
    "BUILTIN_TICK_ROLES",
    "SLOTS",
    "ModelSource",
    "agent_count",
    "build_roles",
    "check_run_size",
    "estimated_trace_mb",
    "max_timelines",
    "role_plan",
    "route_table",
    "trace_name",
    "with_role_routes",
]

SLOTS: dict[str, str] = {"initializer": "init", "governance": "review", "reporter": "report"}
"""The run's one-per-phase role slots and the phase each takes."""
_SLOT_OF_PHASE = {phase: slot for slot, phase in SLOTS.items()}
BUILTIN_TICK_ROLES = ("actor", "cohort")


class ModelSource(Protocol):
    """Anything that hands out a model per role: a :class:`ModelPool`, or a test's double."""

    def for_role(self, role: str) -> Model: ...


def route_table(models: ModelConfig) -> RouteTable:
    """The routes ``--model`` and ``--role-model`` name; a malformed route is a ConfigError."""
    return RouteTable.from_flags(models.model, models.role_models)


def role_plan(config: RunConfig) -> dict[str, RoleSpec]:
    """Which role fills each slot and each tick role of the run, checked before anything runs.

    Keys are slot names (``initializer``, ``governance``, ``reporter``) and ``tick:NAME`` for
    tick roles. Unknown names and roles in the wrong phase are errors.
    """
    slots = {slot: config.roles.get(slot, slot) for slot in SLOTS}
    named_in: dict[str, str] = {}  # a card's own tick role: the first field that names it
    seeds = config.card.seeds
    if seeds is not None:
        for i, actor in enumerate(seeds.actors):
            named_in.setdefault(actor.role, f"seeds.actors.{i}.role")
        for i, cohort in enumerate(seeds.cohorts):
            named_in.setdefault(cohort.role, f"seeds.cohorts.{i}.role")
    tick_names = set(BUILTIN_TICK_ROLES) | set(named_in)
    roles = registered_roles()
    plan: dict[str, RoleSpec] = {}
    for name in config.added_roles:
        spec = _added_role(config, name, roles)
        if spec.phase == "tick":
            plan[f"tick:{name}"] = spec
        elif spec.phase in _SLOT_OF_PHASE:
            slots[_SLOT_OF_PHASE[spec.phase]] = name
        else:
            raise ConfigError(
                f"role '{name}' runs in phase '{spec.phase}', which a simulation does not have "
                "(a direct role runs with `worldsim forecast`, a news role with `run --continue`)",
                field="role",
            )
    for slot, phase in SLOTS.items():
        plan[slot] = get_role(slots[slot], phase, roles=roles)
    for name in sorted(tick_names):
        try:
            plan[f"tick:{name}"] = get_role(config.roles.get(name, name), "tick", roles=roles)
        except RoleError as exc:
            if name not in named_in or name in config.roles:
                raise
            raise RoleError(exc.message, file=config.card_path, field=named_in[name]) from None
    return plan


def _added_role(config: RunConfig, name: str, roles: Mapping[str, RoleSpec]) -> RoleSpec:
    """An added role, or an error naming where it was added (``extra_roles``: ``--role`` or
    a config file; the card's or the policy's ``roles``) and the file that would define it."""
    if name in roles:
        return roles[name]
    if name in config.extra_roles:
        file, field = None, "extra_roles"
    elif name in config.card.roles:
        file, field = config.card_path, "roles"
    elif config.policy_path is not None:
        file, field = config.policy_path, "roles"
    else:
        file, field = None, f"policy {config.policy.name}: roles"
    known = ", ".join(roles) or "none"
    raise RoleError(
        f"unknown role '{name}': no project file agents/{name}.md, no plug-in (known: {known})",
        file=file,
        field=field,
    )


def max_timelines(config: RunConfig) -> int:
    """The most timelines the run's policy allows: ``max_active``, or fewer where depth, forks
    per tick and ticks cannot reach it (each timeline forks at most once per branch a tick)."""
    policy = config.policy
    per_timeline = policy.max_branches_per_tick * config.effective_ticks
    total = level = 1
    for _ in range(policy.max_depth):
        level *= per_timeline
        total += level
        if level == 0 or total >= policy.max_active:
            break
    return min(total, policy.max_active)


def agent_count(config: RunConfig, plan: Mapping[str, RoleSpec]) -> int:
    """The agents acting on each timeline: the card's actors and cohorts (the generic world's
    without seeds) and every added tick role. A model-built world may differ, and is not known
    before the run."""
    seeds = world_seeds(config.card)
    own = {f"tick:{name}" for name in BUILTIN_TICK_ROLES}
    own |= {f"tick:{a.role}" for a in seeds.actors} | {f"tick:{c.role}" for c in seeds.cohorts}
    added = [key for key in plan if key.startswith("tick:") and key not in own]
    return len(seeds.actors) + len(seeds.cohorts) + len(added)


def estimated_trace_mb(config: RunConfig, plan: Mapping[str, RoleSpec]) -> float:
    """An upper estimate of the run's trace size in MB (docs/limits.md): timelines × ticks ×
    (agents × ``BYTES_PER_AGENT_TICK`` + ``BYTES_PER_TIMELINE_TICK``)."""
    per_tick = (
        agent_count(config, plan) * bounds.BYTES_PER_AGENT_TICK + bounds.BYTES_PER_TIMELINE_TICK
    )
    return max_timelines(config) * config.effective_ticks * per_tick / 1e6


def check_run_size(
    config: RunConfig,
    plan: Mapping[str, RoleSpec],
    max_trace_mb: float | None = bounds.DEFAULT_MAX_TRACE_MB,
) -> None:
    """Refuse a run whose estimated trace exceeds ``max_trace_mb`` (``None``: no limit), saying
    what to raise or lower."""
    if max_trace_mb is None:
        return
    estimate = estimated_trace_mb(config, plan)
    if estimate <= max_trace_mb:
        return
    raise ConfigError(
        f"the run could write a trace of about {estimate:,.0f} MB ({max_timelines(config)} "
        f"timelines × {config.effective_ticks} ticks × {agent_count(config, plan)} agents), "
        f"over the {max_trace_mb:,.0f} MB limit: raise --max-trace-mb, or lower the policy's "
        "max_active, the ticks or the number of actors",
        file=config.card_path,
    )


def with_role_routes(config: RunConfig, plan: Mapping[str, RoleSpec]) -> RunConfig:
    """Add each prompt role's front-matter ``route`` unless ``--role-model`` names it already."""
    models = config.models
    named = {entry.split("=", 1)[0].strip() for entry in models.role_models}
    extra = tuple(
        f"{spec.name}={spec.route}"
        for spec in sorted({s.name: s for s in plan.values()}.values(), key=lambda s: s.name)
        if spec.route is not None and spec.name not in named
    )
    if not extra:
        return config
    routed = models.model_copy(update={"role_models": (*models.role_models, *extra)})
    return config.model_copy(update={"models": routed})


def build_roles(
    config: RunConfig, plan: Mapping[str, RoleSpec], source: ModelSource, emit: Emit
) -> dict[str, Any]:
    """Build every planned role with the model its route resolves to, every call traced."""
    return {
        key: spec.build(traced(source.for_role(spec.name), emit), seed=config.seed)
        for key, spec in plan.items()
    }


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_ROUTES_CHARS = 100


_DEFAULT_RULE: str = RunConfig.model_fields["extraction_rule"].default
"""The extraction rule of a run that names none."""


def _slug(text: str) -> str:
    return _UNSAFE.sub("-", text.replace("/", "-").replace("=", "-"))


def trace_name(config: RunConfig) -> str:
    """The trace's file name:
    ``<card>__<method>[__<routes>][__<added roles>][__<settings>]__s<seed>.jsonl``.

    It names what tells two runs of one card, method and seed apart: the model routes when any
    is not ``offline`` (``openai-gpt-4o-mini``, then each ``--role-model`` as
    ``+governance-openai-gpt-4o``; past 100 characters, ``+roles-`` and a digest of them), the
    roles added to the run (``extra_roles``, joined by ``+``) and the settings that differ from
    their defaults (`settings_part`). A run on the offline model with no added role and default
    settings is ``<card>__<method>__s<seed>.jsonl``."""
    models = config.models
    parts = [config.card.id, config.method_label]
    if not parse_route(models.model, field="--model").is_offline or models.role_models:
        routes = "+".join(_slug(route) for route in (models.model, *sorted(models.role_models)))
        if len(routes) > _MAX_ROUTES_CHARS:
            digest = hashlib.sha256("\n".join(sorted(models.role_models)).encode()).hexdigest()
            routes = f"{_slug(models.model)}+roles-{digest[:8]}"
        parts.append(routes)
    if config.extra_roles:
        parts.append("+".join(_slug(role) for role in config.extra_roles))
    settings = settings_part(config)
    if settings:
        parts.append(settings)
    return "__".join(parts) + f"__s{config.seed}.jsonl"


def settings_part(config: RunConfig) -> str:
    """The settings of a run that differ from their defaults, as a trace name shows them,
    joined by ``+`` (empty when none do): ``ticks3`` (ticks other than the policy's),
    the extraction rule (``candidate-status-mass-1``), the condition (``vanilla``), the forecast
    date (``at20270301``), and a digest of the slot overrides (``slots-…``) and of the
    interventions (``iv-…``)."""
    bits: list[str] = []
    if config.kind != "direct":
        if config.effective_ticks != (config.policy.ticks or DEFAULT_TICKS):
            bits.append(f"ticks{config.effective_ticks}")
        if config.extraction_rule != _DEFAULT_RULE:
            bits.append(_slug(config.extraction_rule))
    if config.condition != DEFAULT_CONDITION:
        bits.append(config.condition)
    if config.forecast_date is not None and config.forecast_date != config.card.as_of:
        bits.append(config.forecast_date.strftime("at%Y%m%dT%H%M%S").removesuffix("T000000"))
    if config.roles:
        bits.append("slots-" + _digest(config.roles))
    if config.interventions:
        bits.append("iv-" + _digest([i.model_dump(mode="json") for i in config.interventions]))
    return "+".join(bits)


def _digest(data: Any) -> str:
    return hashlib.sha256(canonical_ascii_bytes(data)).hexdigest()[:8]
