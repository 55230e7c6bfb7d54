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
    "award-best-picture": "bb14fdf1283793e583909ca0043b186debcaea22cbe686873bb49c0d240de6b9",
    "central-bank-march": "dbf7d6595b09146a0708ed91eb5edf834df7f2f6f913e3f249b8307d43e4bd50",
    "election-runoff": "41cac58b6ea83798d5cdf33a4b41b1cc327baab466fbaf8e750750d8226d089e",
    "merger-review": "20a5132573a2c2e18f9fd2a599ca2aa56d5a7995a7186875f28d372ae51109bb",
    "product-launch": "df5459fd50289972944565f1af5bc7f44b385eb20d9d1073288e2dfef3b59440",
    "space-launch": "5029408e12fc3c749d8e74b19fb23d48daa116afa97c968959609dbe68fd1459",
}


def test_every_demo_card_is_pinned() -> None:
    assert {p.stem for p in (ROOT / "scenarios").glob("*.yaml")} == set(PINNED)


@pytest.mark.parametrize("card_id", sorted(PINNED))
def test_canonical_hash_is_pinned(card_id: str, tmp_path: Path) -> None:
    card = load_card(ROOT / "scenarios" / f"{card_id}.yaml")
    config = RunConfig(card=card, policy=load_policy("branching"), seed=0)
    result = anyio.run(lambda: run_card(config, tmp_path, fsync=False))
    assert canonical_hash(read_trace(result.trace)) == PINNED[card_id]
