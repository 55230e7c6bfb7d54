"""The one role registry: prompt roles and Python roles, found by name, each runnable.

Where roles come from, later sources replacing earlier ones by name:

1. prompt roles bundled with worldsim (``agents/*.md`` in the package);
2. prompt roles in the project's ``agents/`` folder (so ``agents/actor.md`` replaces the
   built-in actor);
3. Python roles from the entry-point group ``worldsim.roles``;
4. Python roles registered in imported code with :func:`register_role`.

A prompt role's front matter decides what it does (``phase``, ``output``, ``tools``, ``route``,
``temperature``, ``max_tokens``); its output schema decides how the result is applied (see
:mod:`worldsim.roles.prompted`). A Python role gets its model and seed when it is built (see
:mod:`worldsim.roles.contracts`). Every role listed here can be built and run.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from worldsim.domain.contracts import PHASE_METHODS, Model, Phase
from worldsim.domain.errors import RoleError

if TYPE_CHECKING:
    from worldsim.roles.contracts import RoleFactory

from worldsim.roles.prompts import ROLE_NAME, PromptRole, known_prompt_roles, load_prompt_file

__all__ = ["RoleSpec", "get_role", "register_role", "registered_roles"]


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """One runnable role: where it comes from and how to build it."""

    name: str
    phase: str
    source: str
    description: str = ""
    prompt: PromptRole | None = None
    factory: RoleFactory | None = None

    @property
    def output(self) -> str | None:
        """The prompt role's output schema; None for a Python role."""
        return self.prompt.meta.output if self.prompt is not None else None

    @property
    def version(self) -> str:
        """The prompt version (12 hex digits of the file's hash), or ``python``."""
        return self.prompt.version if self.prompt is not None else "python"

    @property
    def route(self) -> str | None:
        """The route the prompt file asks for; None means the run's ``--model``."""
        return self.prompt.meta.route if self.prompt is not None else None

    def build(self, model: Model, *, seed: int = 0) -> Any:
        """The role, ready to run with ``model`` (the model its route resolves to)."""
        if self.prompt is not None:
            from worldsim.roles.prompted import prompted_role

            return prompted_role(self.prompt, model, seed=seed)
        assert self.factory is not None
        try:
            params = inspect.signature(self.factory).parameters
        except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
            params = {}  # type: ignore[assignment]
        offered = {"model": model, "seed": seed}
        try:
            role = self.factory(**{k: v for k, v in offered.items() if k in params})
        except Exception as exc:  # a plug-in's own failure: named, not a traceback
            raise RoleError(
                f"role '{self.name}' ({self.source}): building it raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        role.name = self.name
        role.phase = self.phase
        return role


_PYTHON: dict[str, RoleSpec] = {}
_ENTRY_POINTS: dict[str, RoleSpec] | None = None

R = TypeVar("R")


def _check(name: str, phase: str, obj: object, where: str) -> None:
    if not re.match(ROLE_NAME, name):
        raise RoleError(
            f"{where}: role name '{name}' must be lower-case words joined by '-' or '_'",
            field="name",
        )
    if phase not in PHASE_METHODS:
        known = ", ".join(PHASE_METHODS)
        raise RoleError(
            f"{where}: role '{name}' has no valid phase (one of {known})", field="phase"
        )
    method = PHASE_METHODS[phase]
    found = getattr(obj, method, None)
    if not callable(found) or (isinstance(obj, type) and not inspect.iscoroutinefunction(found)):
        raise RoleError(f"{where}: role '{name}' ({phase}) must define async '{method}'")


def register_role(
    name: str, *, phase: Phase, replace: bool = False
) -> Callable[[type[R]], type[R]]:
    """Class decorator that registers a Python role under ``name``; returns the class unchanged.

    The class is built per run as ``cls(model=..., seed=...)``, passing only the keywords its
    constructor names.
    """

    def decorate(cls: type[R]) -> type[R]:
        where = f"{cls.__module__}.{cls.__qualname__}"
        _check(name, phase, cls, where)
        old = _PYTHON.get(name)
        # the same class defined again (a notebook cell run twice) replaces itself
        if old is not None and not replace and old.source != f"python {where}":
            raise RoleError(
                f"role '{name}' is already registered by {old.source} "
                "(register_role(..., replace=True) replaces it)"
            )
        doc = (cls.__doc__ or "").strip().splitlines()
        _PYTHON[name] = RoleSpec(
            name=name,
            phase=phase,
            source=f"python {where}",
            description=doc[0] if doc else "",
            factory=cls,
        )
        return cls

    return decorate


def _entry_points() -> dict[str, RoleSpec]:
    global _ENTRY_POINTS
    if _ENTRY_POINTS is not None:
        return _ENTRY_POINTS
    found: dict[str, RoleSpec] = {}
    for ep in importlib.metadata.entry_points(group="worldsim.roles"):
        where = f"entry point {ep.name} ({ep.value})"
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plug-in is named, not a traceback
            raise RoleError(f"cannot load role plug-in {where}: {exc}") from None
        phase = getattr(obj, "phase", None)
        _check(ep.name, str(phase), obj, where)
        doc = (obj.__doc__ or "").strip().splitlines()
        found[ep.name] = RoleSpec(
            name=ep.name,
            phase=str(phase),
            source=where,
            description=doc[0] if doc else "",
            factory=obj,
        )
    _ENTRY_POINTS = found
    return found


def _prompt_specs() -> dict[str, RoleSpec]:
    specs: dict[str, RoleSpec] = {}
    for name, (path, bundled) in known_prompt_roles().items():
        prompt = load_prompt_file(path)
        specs[name] = RoleSpec(
            name=name,
            phase=prompt.meta.phase,
            source=f"{'built-in' if bundled else 'project'} {path.parent.name}/{path.name}",
            description=prompt.meta.description,
            prompt=prompt,
        )
    return specs


def registered_roles() -> dict[str, RoleSpec]:
    """Every runnable role by name. A malformed prompt file or plug-in is a RoleError here."""
    roles = _prompt_specs()
    roles.update(_entry_points())
    roles.update(_PYTHON)
    return dict(sorted(roles.items()))


def get_role(
    name: str, phase: str | None = None, *, roles: Mapping[str, RoleSpec] | None = None
) -> RoleSpec:
    """The role registered as ``name``; with ``phase``, check it runs there. ``roles`` is the
    registry as `registered_roles` gave it, to look up several names with one reading of the
    prompt folders (by default they are read again)."""
    roles = registered_roles() if roles is None else roles
    spec = roles.get(name)
    if spec is None:
        known = ", ".join(roles) or "none"
        raise RoleError(f"unknown role '{name}' (known: {known})", field="role")
    if phase is not None and spec.phase != phase:
        raise RoleError(f"role '{name}' runs in phase '{spec.phase}', not '{phase}'", field="role")
    return spec
