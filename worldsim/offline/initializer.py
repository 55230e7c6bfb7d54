"""The offline initializer: the world from the card's seeds, or the documented generic world."""

from __future__ import annotations

from worldsim.roles.registry import InitContext, register_role
from worldsim.world.build import build_world
from worldsim.world.state import WorldState

__all__ = ["OfflineInitializer"]


@register_role("initializer", phase="init")
class OfflineInitializer:
    """Builds the world from the card's seeds, or a documented generic world."""

    name = "initializer"
    phase = "init"

    def __init__(self) -> None:
        self.problems: list[str] = []

    async def initialize(self, ctx: InitContext) -> WorldState:
        state, self.problems = build_world(ctx.card, ctx.ticks)
        return state
