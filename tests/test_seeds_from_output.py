"""A model's world becomes the card's seeds: its actors are checked together, and one that does
not fit a seed is refused as it would be alone."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from tests.support import DEMO_CARD
from worldsim.domain.cards import load_card
from worldsim.domain.outputs import InitActor, WorldOutput
from worldsim.offline.model import world_output
from worldsim.roles.apply import seeds_from_output
from worldsim.world.views import InitContext


def _context() -> InitContext:
    return InitContext(card=load_card(DEMO_CARD), ticks=4, rng=np.random.default_rng(0))


def test_a_cards_seeds_come_back_from_their_world_output() -> None:
    ctx = _context()
    seeds = ctx.card.seeds
    assert seeds is not None and len(seeds.actors) > 1
    back, problems = seeds_from_output(world_output(seeds, ctx.card), ctx)
    assert problems == []
    assert back.actors == seeds.actors


def test_an_actor_that_fits_no_seed_is_refused_by_name() -> None:
    ctx = _context()
    assert ctx.card.seeds is not None
    out = world_output(ctx.card.seeds, ctx.card)
    good = out.actors[0]
    bad = InitActor(**{**good.model_dump(), "id": "nameless", "name": ""})
    broken = WorldOutput.model_validate({**out.model_dump(), "actors": [good, bad]})
    with pytest.raises(ValidationError) as refused:
        seeds_from_output(broken, ctx)
    assert refused.value.errors()[0]["loc"] == ("name",)  # as one actor alone is refused
