"""The offline model's tested properties (determinism, monotonicity, unbiased branching)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import RunFn
from tests.support import DEMO_CARD, card_with
from worldsim.domain.cards import Card, load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.trace.canonical import canonical_hash
from worldsim.trace.reader import read_trace

CARD = load_card(DEMO_CARD)


def _p(card: Card, policy: str, seed: int, out: Path) -> float:
    async def go() -> float:
        result = await run_card(
            RunConfig(card=card, policy=load_policy(policy), seed=seed),
            out,
            overwrite=True,
            fsync=False,
        )
        assert result.p_yes is not None
        return result.p_yes

    return anyio.run(go)


def test_same_card_policy_seed_same_result_and_hash(run: RunFn) -> None:
    for policy in ("no_branch", "branching", "adaptive"):
        a, b = run(CARD, policy, 4), run(CARD, policy, 4)
        assert (a.p_yes, a.timelines, a.forks) == (b.p_yes, b.timelines, b.forks)
        assert canonical_hash(read_trace(a.trace)) == canonical_hash(read_trace(b.trace))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    low=st.floats(0.05, 0.9),
    bump=st.floats(0.01, 0.5),
    policy=st.sampled_from(["no_branch", "branching"]),
)
def test_raising_the_base_rate_never_lowers_p_yes(
    tmp_path_factory: object, seed: int, low: float, bump: float, policy: str
) -> None:
    out = Path(str(tmp_path_factory.mktemp("mono")))  # type: ignore[attr-defined]
    high = min(0.95, low + bump)
    p_low = _p(card_with(CARD, base_rate=low), policy, seed, out)
    p_high = _p(card_with(CARD, base_rate=high), policy, seed, out)
    assert p_high >= p_low - 1e-12


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    shift=st.floats(0.05, 0.6),
    policy=st.sampled_from(["no_branch", "branching"]),
)
def test_actors_leaning_toward_yes_never_lower_p_yes(
    tmp_path_factory: object, seed: int, shift: float, policy: str
) -> None:
    out = Path(str(tmp_path_factory.mktemp("stance")))  # type: ignore[attr-defined]
    actors = CARD.model_dump(mode="json")["seeds"]["actors"]
    leaning = [{**a, "stance": min(1.0, a["stance"] + shift)} for a in actors]
    p_base = _p(CARD, policy, seed, out)
    p_lean = _p(card_with(CARD, actors=leaning), policy, seed, out)
    assert p_lean >= p_base - 1e-12


def test_branching_is_unbiased_and_lower_variance(tmp_path: Path) -> None:
    """Over 200 seeds, mean branching p_yes agrees with the mean no-branch outcome (forced values
    for unresolved paths) within 3 standard errors, and its spread across seeds is smaller."""
    n = 200
    single = [_p(CARD, "no_branch", s, tmp_path) for s in range(n)]
    branched = [_p(CARD, "branching", s, tmp_path) for s in range(n)]
    se = math.sqrt(statistics.variance(single) / n + statistics.variance(branched) / n)
    assert abs(statistics.fmean(branched) - statistics.fmean(single)) <= 3 * se
    assert statistics.stdev(branched) < statistics.stdev(single)
