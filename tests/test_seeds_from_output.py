"""A model's world becomes the card's seeds: its actors are checked together, and one that does
not fit a seed is refused as it would be alone; an actor that is one of the card's own seeds is
that seed."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


def test_a_world_keeps_the_cards_own_actors_and_checks_the_ones_it_changed() -> None:
    ctx = _context()
    seeds = ctx.card.seeds
    assert seeds is not None and len(seeds.actors) > 2
    out = world_output(seeds, ctx.card)
    moved = InitActor(**{**out.actors[1].model_dump(), "stance": -0.25})
    added = InitActor(**{**out.actors[0].model_dump(), "id": "newcomer", "name": "New"})
    changed = WorldOutput.model_validate(
        {**out.model_dump(), "actors": [out.actors[0], moved, *out.actors[2:], added]}
    )
    back, problems = seeds_from_output(changed, ctx)
    assert problems == []
    assert back.actors[0] is seeds.actors[0]  # the card's seed, not validated again
    assert back.actors[1] == seeds.actors[1].model_copy(update={"stance": -0.25})
    assert back.actors[-1].id == "newcomer" and back.actors[-1].name == "New"
    assert back.actors[2:-1] == seeds.actors[2:]


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=80) | st.text(alphabet="aZ09_.:- é/", max_size=80))
def test_an_actors_id_is_its_text_with_unsafe_runs_replaced_and_underscores_stripped(
    text: str,
) -> None:
    ctx = _context()
    assert ctx.card.seeds is not None
    out = world_output(ctx.card.seeds, ctx.card)
    named = InitActor(**{**out.actors[0].model_dump(), "id": text})
    twice = WorldOutput.model_validate({**out.model_dump(), "actors": [named, named]})
    back, _ = seeds_from_output(twice, ctx)
    safe = re.sub(r"[^A-Za-z0-9_.:-]+", "_", text).strip("_")[:80]
    expected = [safe, f"{safe}_2"] if safe else ["actor0", "actor1"]  # the second: taken
    assert [a.id for a in back.actors] == expected
