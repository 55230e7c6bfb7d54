"""Invariants of the statistics, checked on generated data (scipy as the oracle)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from worldsim.scoring.calibration import calibrate, wilson_interval
from worldsim.scoring.metrics import binary_scores, multiclass_scores
from worldsim.scoring.paired import bootstrap_mean, sign_test, sign_test_p

probs = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
deltas = st.lists(
    st.floats(min_value=-1.0, max_value=1.0, allow_nan=False), min_size=1, max_size=60
)
eps = st.floats(min_value=0.0, max_value=0.5, allow_nan=False)


@given(deltas, eps)
def test_sign_test_counts_sum_to_n_and_p_is_a_probability(d: list[float], e: float) -> None:
    result = sign_test(d, e)
    assert result.wins + result.losses + result.ties == len(d)
    assert 0.0 <= result.p_value <= 1.0
    assert result.wins == sum(1 for x in d if x > e)


@given(st.integers(min_value=0, max_value=80), st.integers(min_value=0, max_value=80))
def test_sign_test_p_matches_scipy_binomtest(wins: int, losses: int) -> None:
    n = wins + losses
    expected = 1.0 if n == 0 else stats.binomtest(max(wins, losses), n, 0.5).pvalue
    assert sign_test_p(wins, losses) == pytest.approx(min(1.0, expected), rel=1e-9, abs=1e-300)
    assert sign_test_p(wins, losses) == sign_test_p(losses, wins)


@given(deltas)
def test_larger_tie_threshold_never_adds_decisions(d: list[float]) -> None:
    loose, strict = sign_test(d, 0.2), sign_test(d, 0.0)
    assert loose.wins <= strict.wins and loose.losses <= strict.losses


@given(probs, st.sampled_from([0, 1]))
def test_binary_brier_and_log_bounds(p: float, y: int) -> None:
    s = binary_scores(p, y)
    assert 0.0 <= s.brier <= 1.0
    assert -math.log(0.99) - 1e-12 <= s.log <= -math.log(0.01) + 1e-12
    assert s.correct == ((p >= 0.5) == (y == 1))


@given(
    st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=2, max_size=6),
    st.integers(min_value=0, max_value=5),
)
def test_multiclass_brier_bounds(weights: list[float], which: int) -> None:
    total = sum(weights)
    options = [(f"o{i}", w / total) for i, w in enumerate(weights)]
    truth = options[which % len(options)][0]
    s = multiclass_scores(options, truth)
    assert 0.0 <= s.brier <= 2.0 + 1e-12
    assert 0.0 < s.log <= -math.log(0.01) + 1e-12


def test_two_option_multiclass_brier_is_twice_the_binary_brier() -> None:
    assert multiclass_scores([("no", 0.3), ("yes", 0.7)], "yes").brier == pytest.approx(
        2 * binary_scores(0.7, 1).brier
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0, max_value=0.5, allow_nan=False), min_size=1, max_size=20),
    st.floats(min_value=-0.3, max_value=0.3),
    st.integers(min_value=0, max_value=2**31),
)
def test_bootstrap_interval_contains_the_mean_for_symmetric_data(
    half: list[float], centre: float, seed: int
) -> None:
    d = [centre + x for x in half] + [centre - x for x in half]
    ci = bootstrap_mean(d, n_resamples=400, seed=seed, level=0.95)
    assert ci.lo <= centre + 1e-12 and centre - 1e-12 <= ci.hi


@given(st.lists(st.tuples(probs, st.sampled_from([0, 1])), max_size=50))
def test_calibration_counts_sum_and_ece_is_bounded(pairs: list[tuple[float, int]]) -> None:
    cal = calibrate(pairs)
    assert sum(b.count for b in cal.bins) == len(pairs)
    assert len(cal.bins) == 10
    if pairs:
        assert cal.ece is not None and 0.0 <= cal.ece <= 1.0
    for b in cal.bins:
        if b.count:
            assert b.wilson_lo is not None and b.wilson_hi is not None
            assert b.wilson_lo <= (b.frequency or 0.0) <= b.wilson_hi


def test_calibration_by_hand() -> None:
    pairs = [(0.05, 0), (0.05, 0), (0.95, 1), (0.95, 0), (1.0, 1)]
    cal = calibrate(pairs)
    assert cal.bins[0].count == 2 and cal.bins[9].count == 3
    # ECE = 2/5·|0.05 − 0| + 3/5·|(0.95 + 0.95 + 1)/3 − 2/3|
    assert cal.ece == pytest.approx(2 / 5 * 0.05 + 3 / 5 * abs(2.9 / 3 - 2 / 3))


@settings(deadline=None)  # scipy's first binomtest may take longer than the default 200 ms
@given(st.integers(min_value=1, max_value=200), st.data())
def test_wilson_interval_matches_scipy(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=n))
    lo, hi = wilson_interval(k, n, 0.95)
    # scipy's binomtest gives the Wilson score interval too.
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo == pytest.approx(ref.low, abs=1e-9)
    assert hi == pytest.approx(ref.high, abs=1e-9)


def test_bootstrap_uses_only_the_seeded_generator() -> None:
    d = list(np.linspace(-0.2, 0.3, 17))
    a = bootstrap_mean(d, n_resamples=3000, seed=1, level=0.9)
    np.random.seed(99)  # global state must not matter
    b = bootstrap_mean(d, n_resamples=3000, seed=1, level=0.9)
    assert (a.lo, a.hi) == (b.lo, b.hi)


@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40),
    st.integers(1, 200),
)
def test_each_forecast_lands_in_the_bin_whose_bounds_hold_it(ps: list[float], n_bins: int) -> None:
    """Bin i holds [lo, hi) as reported (the last bin holds 1 too), whatever rounding p·B
    would do: 0.57 is in [0.57, 0.58) of 100 bins."""
    cal = calibrate([(p, 1) for p in ps], n_bins=n_bins)
    for b in cal.bins:
        held = [p for p in ps if b.lo <= p < b.hi or (p == 1.0 and b.hi == 1.0)]
        assert b.count == len(held)
    hundred = calibrate([(0.57, 1), (0.29, 0)], n_bins=100)
    assert [(b.lo, b.count) for b in hundred.bins if b.count] == [(0.29, 1), (0.57, 1)]
