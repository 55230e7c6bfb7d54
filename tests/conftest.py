"""Shared fixtures: no network beyond loopback, the demo card, a helper that runs a card."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import DEMO_CARD
from worldsim.domain.cards import Card, load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import BranchPolicy, load_policy
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult
from worldsim.testing import block_network

RunFn = Callable[..., RunResult]


@pytest.fixture(autouse=True, scope="session")
def _no_network() -> Iterator[None]:
    """Any connection to an address other than loopback fails inside the test suite."""
    with block_network():
        yield


@pytest.fixture(autouse=True)
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own user-level response cache (never the real user's), which the commands
    it runs, in process or in a child process, find through ``WORLDSIM_CACHE_DIR``."""
    folder = tmp_path / "user-cache"
    monkeypatch.setenv("WORLDSIM_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(scope="session")
def demo_card() -> Card:
    return load_card(DEMO_CARD)


@pytest.fixture(scope="session")
def branching_demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace of a branching run of the demo card (its evidence inline, seed 6): several
    timelines at once. Read it; copy it to change it."""
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=6)
    out = tmp_path_factory.mktemp("branching-demo")
    result = anyio.run(lambda: run_card(config, out, fsync=False))
    assert result.forks >= 2
    return result.trace


@pytest.fixture
def run(tmp_path: Path) -> RunFn:
    """Run a card synchronously: ``run(card, policy="branching", seed=0, **config)``."""
    counter = iter(range(1_000_000))

    def _run(
        card: Card, policy: str | BranchPolicy = "branching", seed: int = 0, **kwargs: Any
    ) -> RunResult:
        out = tmp_path / f"run{next(counter)}"
        chosen = load_policy(policy) if isinstance(policy, str) else policy
        config = RunConfig(card=card, policy=chosen, seed=seed, **kwargs)

        async def go() -> RunResult:
            return await run_card(config, out, fsync=False)

        return anyio.run(go)

    return _run
