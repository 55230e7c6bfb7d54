"""The arithmetic of news: the offline assessor's rule and the re-weighting of particles."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldsim.offline.news import stance_likelihood
from worldsim.world.particles import NoSurvivors, reweigh

unit = st.floats(0.0, 1.0, allow_nan=False)
stance = st.floats(-1.0, 1.0, allow_nan=False)
mass = st.floats(1e-6, 1.0, allow_nan=False)


@st.composite
def particles(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    n = draw(st.integers(1, 12))
    raw = draw(st.lists(mass, min_size=n, max_size=n))
    total = math.fsum(raw)
    likelihood = draw(st.lists(st.floats(1e-6, 1.0), min_size=n, max_size=n))
    return [m / total for m in raw], likelihood


@settings(max_examples=200, deadline=None)
@given(particles(), st.floats(0.0, 0.5))
def test_reweighting_conserves_mass_and_prunes_to_zero(
    drawn: tuple[list[float], list[float]], prune_below: float
) -> None:
    prior, likelihood = drawn
    try:
        made = reweigh(prior, likelihood, prune_below)
    except NoSurvivors:
        w = [m * lik for m, lik in zip(prior, likelihood, strict=True)]
        assert all(x / math.fsum(w) < prune_below for x in w)
        return
    assert abs(math.fsum(made.posterior) - 1.0) < 1e-9
    for post, cut in zip(made.posterior, made.pruned, strict=True):
        assert (post == 0.0) if cut else post > 0.0
    assert 1.0 - 1e-9 <= made.effective_paths <= len(prior) + 1e-9


@settings(max_examples=200, deadline=None)
@given(particles())
def test_a_particle_gains_mass_exactly_when_the_news_is_likelier_under_it(
    drawn: tuple[list[float], list[float]],
) -> None:
    prior, likelihood = drawn
    made = reweigh(prior, likelihood, 0.0)
    for m, lik, w in zip(prior, likelihood, made.posterior, strict=True):
        if abs(lik - made.evidence) > 1e-9 * made.evidence:
            assert (w > m) == (lik > made.evidence)


@settings(max_examples=300, deadline=None)
@given(stance, unit, unit, st.floats(0.0, 1.0))
def test_the_offline_rule_is_monotone_in_agreement(
    s: float, q1: float, q2: float, kappa: float
) -> None:
    """A document that leans yes is likelier under a timeline that expects yes more, and one
    that leans no, less; every likelihood lies in [(1 − κ)/(1 + κ), 1]."""
    low, high = sorted((q1, q2))
    l_low, l_high = stance_likelihood(s, low, kappa), stance_likelihood(s, high, kappa)
    floor = (1 - kappa) / (1 + kappa)
    for value in (l_low, l_high):
        assert floor - 1e-12 <= value <= 1.0 + 1e-12
    if s > 0:
        assert l_high >= l_low
    elif s < 0:
        assert l_high <= l_low


def test_news_the_rule_cannot_weigh_leaves_every_particle_as_it_was() -> None:
    assert stance_likelihood(None, 0.9, 0.5) == 1.0  # no stance
    assert stance_likelihood(0.8, None, 0.5) == 1.0  # a multiple-choice card


def test_news_that_contradicts_a_particle_moves_mass_to_the_one_it_supports() -> None:
    yes_leaning, no_leaning = 0.8, 0.2
    likelihood = [stance_likelihood(0.6, q, 0.5) for q in (yes_leaning, no_leaning)]
    made = reweigh([0.5, 0.5], likelihood, 0.0)
    assert made.posterior[0] > 0.5 > made.posterior[1]


def test_news_that_no_particle_survives_is_refused() -> None:
    with pytest.raises(NoSurvivors):
        reweigh([0.5, 0.5], [0.0, 0.0], 0.0)
    with pytest.raises(NoSurvivors, match="prune_below"):
        reweigh([0.5, 0.5], [1.0, 1.0], 0.6)
