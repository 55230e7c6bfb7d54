"""A 24-card, six-method table with hand-computed scores, exact sign tests and the bootstrap."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from tests.scoring.conftest import Runner, write_csv

YES_CARDS = [f"c{i:02d}" for i in range(1, 17)]  # c01..c16 resolved yes
NO_CARDS = [f"c{i:02d}" for i in range(17, 25)]  # c17..c24 resolved no


def _p(method: str, index: int) -> float:
    """Forecasts chosen so every score can be worked out by hand (index is 1-based)."""
    yes = index <= 16
    if method == "half":
        return 0.5
    if method == "sure":
        return 1.0 if yes else 0.0
    if method == "wrong":
        return 0.0 if yes else 1.0
    if method == "seventy":
        return 0.7
    if method == "mixed":  # right on c01-12 and c17-20, on the wrong side on c13-16 and c21-24
        if yes:
            return 0.9 if index <= 12 else 0.4
        return 0.1 if index <= 20 else 0.6
    if method == "edge":  # 0.995 is clipped to 0.99 in the log loss
        return 0.995 if yes else 0.45
    raise AssertionError(method)


METHODS = ("half", "sure", "wrong", "seventy", "mixed", "edge")

# Hand computation, 16 yes and 8 no cards:
#   half:    Brier 0.25;                       log ln 2 = 0.6931;            accuracy 16/24
#   sure:    Brier 0;                          log −ln 0.99 = 0.0101;        accuracy 1
#   wrong:   Brier 1;                          log −ln 0.01 = 4.6052;        accuracy 0
#   seventy: Brier (16·0.09 + 8·0.49)/24 = 0.2233;
#            log (16·0.356675 + 8·1.203973)/24 = 0.6391;                    accuracy 16/24
#   mixed:   Brier (12·0.01 + 4·0.36 + 4·0.01 + 4·0.36)/24 = 3.04/24 = 0.1267;
#            log (16·0.105361 + 8·0.916291)/24 = 0.3757;                    accuracy 16/24
#   edge:    Brier (16·0.000025 + 8·0.2025)/24 = 1.6204/24 = 0.0675;
#            log (16·0.010050 + 8·0.597837)/24 = 0.2060;                    accuracy 1
HAND = {
    "half": (0.2500, 0.6931, 16 / 24),
    "sure": (0.0000, 0.0101, 1.0),
    "wrong": (1.0000, 4.6052, 0.0),
    "seventy": (0.2233, 0.6391, 16 / 24),
    "mixed": (0.1267, 0.3757, 16 / 24),
    "edge": (0.0675, 0.2060, 1.0),
}

# half → mixed: d = 0.24 on the 16 cards mixed gets right, −0.11 on the 8 it gets wrong.
# edge → sure: d = 0.000025 on the 16 yes cards, 0.2025 on the 8 no cards.
# p = 2·P[X ≥ max(w, l)], X ~ Bin(w + l, 1/2): 2·Σ_{k≥16} C(24,k)/2^24 = 2543252/16777216.
SIGN_TABLES = {
    ("half", "mixed"): [
        (0.0, 16, 8, 0, 2543252 / 2**24),
        (0.0001, 16, 8, 0, 2543252 / 2**24),
        (0.001, 16, 8, 0, 2543252 / 2**24),
        (0.2, 16, 0, 8, 2 / 2**16),
        (0.3, 0, 0, 24, 1.0),
    ],
    ("edge", "sure"): [
        (0.0, 24, 0, 0, 2 / 2**24),
        (0.0001, 8, 0, 16, 2 / 2**8),
        (0.001, 8, 0, 16, 2 / 2**8),
        (0.2, 8, 0, 16, 2 / 2**8),
        (0.3, 0, 0, 24, 1.0),
    ],
}
TIE_EPS = "0,0.0001,0.001,0.2,0.3"


@pytest.fixture
def table24(tmp_path: Path) -> tuple[Path, Path]:
    cards = YES_CARDS + NO_CARDS
    preds = write_csv(
        tmp_path / "predictions.csv",
        ["card_id", "method", "p_yes", "model", "run_id"],
        [
            (card, method, _p(method, i), "offline", f"{method}-{card}")
            for i, card in enumerate(cards, start=1)
            for method in METHODS
        ],
    )
    labels = write_csv(
        tmp_path / "labels.csv",
        ["card_id", "outcome"],
        [(c, "yes") for c in YES_CARDS] + [(c, "no") for c in NO_CARDS],
    )
    return preds, labels


def _score(run: Runner, tmp_path: Path, *args: str | Path) -> dict[str, Any]:
    out = tmp_path / "score.json"
    result = run("score", *args, "--json", out)
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_command_reproduces_hand_computed_brier_log_and_accuracy(
    run: Runner, tmp_path: Path, table24: tuple[Path, Path]
) -> None:
    preds, labels = table24
    doc = _score(run, tmp_path, preds, "--labels", labels)
    assert doc["schema"] == "worldsim.score/1"
    assert doc["n_cards"] == 24
    assert doc["clip"] == [0.01, 0.99]
    assert set(doc["methods"]) == set(METHODS)
    for method, (brier, log, accuracy) in HAND.items():
        m = doc["methods"][method]
        assert m["n"] == 24
        assert round(m["brier"], 4) == pytest.approx(brier, abs=1e-12), method
        assert round(m["log"], 4) == pytest.approx(log, abs=1e-12), method
        assert m["accuracy"] == pytest.approx(accuracy)
        assert m["mean_unresolved_mass"] is None


def test_aggregates_are_recomputable_from_the_per_card_rows(
    run: Runner, tmp_path: Path, table24: tuple[Path, Path]
) -> None:
    preds, labels = table24
    doc = _score(run, tmp_path, preds, "--labels", labels, "--compare", "half:mixed")
    for method, m in doc["methods"].items():
        rows = [r for r in doc["per_card"] if r["method"] == method]
        assert len(rows) == m["n"]
        assert math.fsum(r["brier"] for r in rows) / len(rows) == pytest.approx(m["brier"])
        assert math.fsum(r["log"] for r in rows) / len(rows) == pytest.approx(m["log"])
    by = {(r["method"], r["card_id"]): r["brier"] for r in doc["per_card"]}
    deltas = [by[("half", c)] - by[("mixed", c)] for c in YES_CARDS + NO_CARDS]
    assert doc["comparisons"][0]["mean_delta_brier"] == pytest.approx(sum(deltas) / 24)
    # (16·0.24 − 8·0.11)/24, positive: mixed beats half.
    assert doc["comparisons"][0]["mean_delta_brier"] == pytest.approx(2.96 / 24)


def test_sign_test_table_matches_hand_counts_and_exact_binomial(
    run: Runner, tmp_path: Path, table24: tuple[Path, Path]
) -> None:
    preds, labels = table24
    doc = _score(
        run,
        tmp_path,
        preds,
        "--labels",
        labels,
        "--compare",
        "half:mixed",
        "--compare",
        "edge:sure",
        "--tie-eps",
        TIE_EPS,
        "--bootstrap",
        "500",
    )
    assert len(doc["comparisons"]) == 2
    for comp in doc["comparisons"]:
        expected = SIGN_TABLES[(comp["baseline"], comp["method"])]
        assert comp["n"] == 24
        got = [(s["eps"], s["wins"], s["losses"], s["ties"]) for s in comp["sign_tests"]]
        assert got == [row[:4] for row in expected]
        for s, row in zip(comp["sign_tests"], expected, strict=True):
            assert s["p_value"] == pytest.approx(row[4], rel=1e-12)
            n = s["wins"] + s["losses"]
            if n:
                oracle = stats.binomtest(max(s["wins"], s["losses"]), n, 0.5).pvalue
                assert s["p_value"] == pytest.approx(min(1.0, oracle), rel=1e-9)


def _continuous_table(tmp_path: Path, n: int = 40) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    ids = [f"k{i:02d}" for i in range(n)]
    y = np.array([1 if i % 3 else 0 for i in range(n)])
    pa = np.array([0.5 + 0.45 * math.sin(1.7 * i) for i in range(n)])
    pb = np.array([0.5 + 0.4 * math.cos(0.9 * i + 0.3) for i in range(n)])
    preds = write_csv(
        tmp_path / "cont.csv",
        ["card_id", "method", "p_yes"],
        [(c, "a", repr(float(pa[i]))) for i, c in enumerate(ids)]
        + [(c, "b", repr(float(pb[i]))) for i, c in enumerate(ids)],
    )
    labels = write_csv(
        tmp_path / "cont-labels.csv",
        ["card_id", "outcome"],
        [(c, "yes" if y[i] else "no") for i, c in enumerate(ids)],
    )
    return preds, labels, (pa - y) ** 2, (pb - y) ** 2


def test_bootstrap_interval_agrees_with_scipy_paired_percentile(
    run: Runner, tmp_path: Path
) -> None:
    preds, labels, loss_a, loss_b = _continuous_table(tmp_path)
    doc = _score(
        run,
        tmp_path,
        preds,
        "--labels",
        labels,
        "--compare",
        "a:b",
        "--bootstrap",
        "20000",
        "--seed",
        "11",
        "--level",
        "0.9",
    )
    comp = doc["comparisons"][0]
    assert comp["bootstrap"] == {
        "n_resamples": 20000,
        "seed": 11,
        "level": 0.9,
        "ci": comp["bootstrap"]["ci"],
    }
    oracle = stats.bootstrap(
        (loss_a, loss_b),
        lambda a, b, axis=-1: np.mean(a - b, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=20000,
        confidence_level=0.9,
        method="percentile",
        random_state=np.random.default_rng(2024),
    )
    # Two independent Monte-Carlo runs: each 5%/95% quantile has a standard error near 0.02·σ
    # (σ the bootstrap standard deviation of the mean), so 0.12·σ is a wide margin.
    sigma = float(np.std(loss_a - loss_b, ddof=0)) / math.sqrt(len(loss_a))
    lo, hi = comp["bootstrap"]["ci"]
    assert lo == pytest.approx(oracle.confidence_interval.low, abs=0.12 * sigma)
    assert hi == pytest.approx(oracle.confidence_interval.high, abs=0.12 * sigma)
    assert lo < comp["mean_delta_brier"] < hi


def test_bootstrap_is_deterministic_for_a_seed(run: Runner, tmp_path: Path) -> None:
    preds, labels, _, _ = _continuous_table(tmp_path)
    args = (preds, "--labels", labels, "--compare", "a:b", "--bootstrap", "2000", "--seed", "5")
    first = _score(run, tmp_path, *args)["comparisons"][0]["bootstrap"]["ci"]
    second = _score(run, tmp_path, *args)["comparisons"][0]["bootstrap"]["ci"]
    other = _score(run, tmp_path, *args[:-1], "6")["comparisons"][0]["bootstrap"]["ci"]
    assert first == second
    assert first != other


def test_summary_prints_coverage_methods_and_comparisons(
    run: Runner, tmp_path: Path, table24: tuple[Path, Path]
) -> None:
    preds, labels = table24
    result = run(
        "score", preds, "--labels", labels, "--compare", "half:mixed", "--bootstrap", "200"
    )
    assert result.code == 0, result.err
    assert "n_predictions=144 n_matched=144" in result.out
    assert "seventy" in result.out
    # rows read from a prediction table are marked in every table printed
    assert "half (unverified) → mixed (unverified)" in result.out
    assert "seventy (unverified)" in result.out
    assert "unverified: forecasts read from prediction tables" in result.out
    assert "exploratory" in result.out
