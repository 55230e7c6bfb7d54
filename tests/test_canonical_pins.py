"""Canonical hashes pinned per demo card (branching, seed 0, the offline model).

A change that alters what a run of the same card, policy and seed contains changes one of these
and must say why in the trace format's revisions (docs/trace-format.md, generated from
worldsim/trace/schema.py); then update the pins.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support import ROOT
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.trace.canonical import canonical_hash
from worldsim.trace.reader import read_trace

PINNED = {
    "award-best-picture": "789263d4be2f44f710ee63f1ed7342e8a39157f098bcfaed2d49fd2e9de0e8f0",
    "central-bank-march": "12e48192dcea82d3f83c756176683cc3c5e10ea08512c6c60121a30f29cc7cda",
    "election-runoff": "f776d1c242162b37f4c6cc732dab8e82de35943eea352cb64bc70f687a0f113a",
    "merger-review": "6e34f002c5521ad478124f91a6f8f3d4cc7e2321667edffa0765dcec5813cca1",
    "product-launch": "4dcd202b8e2311fdec55bff2afc5fbe9c1611e071b4a0a91e294d75fd49eaa57",
    "space-launch": "2948990ff6032f3afb7cdfec1f258d9bd4a958bf3c03b371a98a45e58b43dab8",
}


def test_every_demo_card_is_pinned() -> None:
    assert {p.stem for p in (ROOT / "scenarios").glob("*.yaml")} == set(PINNED)


@pytest.mark.parametrize("card_id", sorted(PINNED))
def test_canonical_hash_is_pinned(card_id: str, tmp_path: Path) -> None:
    card = load_card(ROOT / "scenarios" / f"{card_id}.yaml")
    config = RunConfig(card=card, policy=load_policy("branching"), seed=0)
    result = anyio.run(lambda: run_card(config, tmp_path, fsync=False))
    assert canonical_hash(read_trace(result.trace)) == PINNED[card_id]
