"""The offline model's tested properties (determinism, monotonicity, unbiased branching)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import RunFn
from tests.support import DEMO_CARD, ROOT, card_with
from worldsim.domain.cards import Card, load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.labels import load_labels
from worldsim.scoring.metrics import binary_scores, multiclass_scores
from worldsim.sim.session import RunResult, run_card
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash

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


def test_a_question_resolved_before_the_deadline_settles_at_its_distribution(run: RunFn) -> None:
    """With hazard 1 the question resolves in tick 0: the timeline ends there, settled at that
    tick's probability (settlement ``expected``) instead of a realized 0 or 1, and nothing of
    the run's mass stays unresolved."""
    result = run(card_with(CARD, hazard=1.0), "no_branch", 3)
    trace = read_trace(result.trace)
    (ended,) = [line.record for line in trace.of_type("timeline_ended")]
    (committed,) = [line.record for line in trace.of_type("tick_committed")]
    assert (ended.data.end_tick, ended.data.status, ended.data.settlement) == (
        0,
        "settled",
        "expected",
    )
    assert committed.data.ledger["cleared"] == committed.data.ledger["not_cleared"] == "open"
    p_now = committed.data.p_yes_now
    assert p_now is not None and 0.0 < p_now < 1.0
    assert ended.data.forced_p_yes == result.p_yes == p_now
    assert result.unresolved_mass == 0.0
    (extraction,) = [line.record.data for line in trace.of_type("extraction")]
    assert extraction.yes_mass == p_now and extraction.no_mass == 1.0 - p_now


def test_only_timelines_that_reach_the_deadline_open_stay_unresolved(run: RunFn) -> None:
    """A run's unresolved mass is the mass of the timelines that reach the deadline with their
    question open: with hazard 0 that is all of it, and a run with a hazard in between leaves
    exactly the deadline timelines' mass unresolved."""
    never = run(card_with(CARD, hazard=0.0), "branching", 0)
    assert never.unresolved_mass == pytest.approx(1.0)
    some = run(card_with(CARD, hazard=0.3), "branching", 0)
    ended = [line.record.data for line in read_trace(some.trace).of_type("timeline_ended")]
    open_mass = sum(e.mass for e in ended if e.status == "deadline")
    assert {e.settlement for e in ended if e.status != "deadline"} <= {"expected"}
    assert 0.0 < some.unresolved_mass < 1.0
    assert some.unresolved_mass == pytest.approx(open_mass)


def test_news_fades_by_half_each_tick_toward_the_prior(run: RunFn) -> None:
    """In a world whose one agent pushes nothing, an event's shift at tick 0 keeps half of itself
    through each of the 7 ticks that follow: the deadline forecast is logit⁻¹(logit b + 2⁻⁷)."""
    quiet = card_with(
        CARD,
        base_rate=0.3,
        hazard=0.0,
        actors=[{"id": "idle", "name": "Idle", "stance": 0.0, "influence": 0.0, "activity": 1.0}],
        cohorts=[],
        relations=[],
        events=[{"id": "news", "title": "News", "date": "2027-01-04", "pressure": 1.0}],
        hypotheses=[],
    )
    result = run(quiet, "no_branch", 0, ticks=8)
    expected = 1.0 / (1.0 + math.exp(-(math.log(0.3 / 0.7) + 0.5**7)))
    assert result.p_yes == pytest.approx(expected, abs=1e-12)


def test_branching_is_unbiased_and_lower_variance(tmp_path: Path) -> None:
    """Over 200 seeds, mean branching p_yes agrees with the mean no-branch outcome (forced values
    for unresolved paths) within 3 standard errors, and its spread across seeds is smaller."""
    n = 200
    single = [_p(CARD, "no_branch", s, tmp_path) for s in range(n)]
    branched = [_p(CARD, "branching", s, tmp_path) for s in range(n)]
    se = math.sqrt(statistics.variance(single) / n + statistics.variance(branched) / n)
    assert abs(statistics.fmean(branched) - statistics.fmean(single)) <= 3 * se
    assert statistics.stdev(branched) < statistics.stdev(single)


def _brier(
    card: Card, outcome: str, p_yes: float | None, p_options: dict[str, float] | None
) -> float:
    if card.kind == "binary":
        assert p_yes is not None
        return binary_scores(p_yes, 1 if outcome == "yes" else 0).brier
    assert p_options is not None
    return multiclass_scores(sorted(p_options.items()), outcome).brier


def _base_rate_brier(card: Card, outcome: str) -> float:
    """The Brier of the card's own prior: ``seeds.base_rate``, or ``base_rates``."""
    assert card.seeds is not None
    if card.kind == "binary":
        assert card.seeds.base_rate is not None
        return _brier(card, outcome, card.seeds.base_rate, None)
    assert card.seeds.base_rates is not None
    return _brier(card, outcome, None, dict(card.seeds.base_rates))


def _run_result(card: Card, path: Path, policy: str, seed: int, out: Path) -> RunResult:
    config = RunConfig(card=card, policy=load_policy(policy), seed=seed, card_path=path)

    async def go() -> RunResult:
        return await run_card(config, out, overwrite=True, fsync=False)

    return anyio.run(go)


def test_forecasts_on_the_demo_cards_score_no_worse_than_their_base_rates(tmp_path: Path) -> None:
    """The quality floor: per policy, the Brier of each run's forecast, averaged over seeds and
    then over the seven demo cards, is at most the cards' own base rates' mean Brier."""
    labels = load_labels(ROOT / "scenarios" / "labels").entries
    paths = sorted((ROOT / "scenarios").glob("*.yaml"))
    cards = [(path, load_card(path)) for path in paths]
    assert len(cards) == 7
    base = statistics.fmean(_base_rate_brier(card, labels[card.id].outcome) for _, card in cards)
    for policy in ("no_branch", "branching"):
        per_card = []
        for path, card in cards:
            outcome = labels[card.id].outcome
            runs = [_run_result(card, path, policy, seed, tmp_path) for seed in range(4)]
            per_card.append(
                statistics.fmean(_brier(card, outcome, r.p_yes, r.p_options) for r in runs)
            )
        assert statistics.fmean(per_card) <= base, (policy, per_card, base)


@pytest.mark.parametrize("impact", [4.0, -50.0, 50.0])
def test_a_hypothesis_with_any_impact_the_card_allows_can_branch(run: RunFn, impact: float) -> None:
    """A branch idea carries the hypothesis's impact; its schema allows what a card allows."""
    hypotheses = [
        {**h, "impact": impact, "probability": 0.45}
        for h in CARD.model_dump(mode="json")["seeds"]["hypotheses"]
    ]
    result = run(card_with(CARD, hypotheses=hypotheses), "branching", 1)
    assert result.p_yes is not None and result.forks >= 1
