"""A role's phase method, called for the engine: what goes wrong inside the role is the role's.

Whatever a role raises of its own (a plug-in's ``ValueError``, an out-of-range value it put in
a ``Proposal``) and whatever it answers of the wrong type (a dict for a ``Review``, ``None`` for
a world) become one :class:`~worldsim.domain.errors.RoleError` naming the role and the method,
not a traceback from deep in the engine. A worldsim error passes through as it is: the engine
decides what a :class:`~worldsim.domain.errors.ModelError` means (an agent sitting the tick
out, a timeline ended, the run ended).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from worldsim.domain.errors import RoleError, WorldsimError, unwrap_error
from worldsim.domain.files import first_error

__all__ = ["call_role", "check_items", "role_name"]


def role_name(role: object) -> str:
    """The name a role is registered under (its class name for an unregistered one)."""
    return str(getattr(role, "name", type(role).__name__))


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _failure(exc: BaseException) -> str:
    """``exc`` in one line: a validation error by its model, first field and message."""
    if isinstance(exc, ValidationError):
        field, message = first_error(exc)
        return f"{exc.title} field '{field}': {message}"
    return str(exc)


async def call_role(
    role: object, method: str, arg: object, returns: tuple[type[Any], ...], expected: str
) -> Any:
    """``await role.<method>(arg)``, checked to be one of ``returns`` (``expected`` names
    them in the error); the role's own failure or a wrong answer is a RoleError."""
    try:
        made = await getattr(role, method)(arg)
    except WorldsimError:
        raise
    except Exception as exc:
        if isinstance(exc, ExceptionGroup) and exc.subgroup(WorldsimError) is not None:
            raise  # from a task group inside the role: the engine finds its worldsim error
        leaf = unwrap_error(exc)  # a task group's failure: the first error it holds
        raise RoleError(
            f"role '{role_name(role)}': {method} raised {type(leaf).__name__}: {_failure(leaf)}"
        ) from exc
    if not isinstance(made, returns):
        raise RoleError(
            f"role '{role_name(role)}': {method} returned {_kind(made)}, not {expected}"
        )
    return made


def check_items(role: object, method: str, items: Iterable[object], kind: type[Any]) -> None:
    """Every item a role's answer holds is a ``kind``, or a RoleError says which is not."""
    for item in items:
        if not isinstance(item, kind):
            raise RoleError(
                f"role '{role_name(role)}': {method} returned a list holding {_kind(item)}, "
                f"not {kind.__name__}"
            )
