"""The base of worldsim's pydantic values: frozen, and refusing a field they do not declare."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["FrozenModel"]


class FrozenModel(BaseModel):
    """A value read or written at a boundary (a model's reply, a trace record, a file): it
    cannot change once made, and a field it does not declare is refused, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)
