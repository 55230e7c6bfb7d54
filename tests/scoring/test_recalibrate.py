"""Cross-validated Platt recalibration: the identity on calibrated forecasts, the right slope on
over- or under-confident ones, no unit's own outcome in its own recalibration, exploratory."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scoring.conftest import Runner, write_csv
from worldsim.scoring.recalibrate import platt_fit


def _sample(n: int, slope: float, seed: int) -> list[tuple[float, int]]:
    """Forecasts q and outcomes drawn with probability sigmoid(slope · logit(q))."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.02, 0.98, n)
    truth = 1 / (1 + np.exp(-slope * np.log(q / (1 - q))))
    y = (rng.uniform(0, 1, n) < truth).astype(int)
    return [(float(a), int(b)) for a, b in zip(q, y, strict=True)]


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000))
def test_calibrated_forecasts_are_left_almost_alone(seed: int) -> None:
    a, b = platt_fit(_sample(4000, 1.0, seed))
    assert abs(a - 1) < 0.15 and abs(b) < 0.15


def test_overconfident_forecasts_are_pulled_in() -> None:
    a, _ = platt_fit(_sample(4000, 0.5, 3))
    assert 0.35 < a < 0.65


def test_separable_outcomes_give_finite_parameters() -> None:
    a, b = platt_fit([(0.2, 0), (0.3, 0), (0.7, 1), (0.8, 1)])
    assert math.isfinite(a) and math.isfinite(b)


def _inputs(tmp_path: Path, flip: str | None = None) -> tuple[Path, Path]:
    cards = [f"c{i}" for i in range(10)]
    preds = write_csv(
        tmp_path / "p.csv",
        ["card_id", "method", "p_yes"],
        [(c, "m", 0.1 + 0.08 * i) for i, c in enumerate(cards)],
    )
    outcomes = {c: "yes" if i % 3 else "no" for i, c in enumerate(cards)}
    if flip is not None:
        outcomes[flip] = "no" if outcomes[flip] == "yes" else "yes"
    labels = write_csv(tmp_path / "l.csv", ["card_id", "outcome"], list(outcomes.items()))
    return preds, labels


def _recalibrated(run: Runner, tmp_path: Path, flip: str | None) -> dict[str, float]:
    tmp_path.mkdir(exist_ok=True)
    preds, labels = _inputs(tmp_path, flip)
    out = tmp_path / "score.json"
    done = run("score", preds, "--labels", labels, "--recalibrate", "m", "--json", out)
    assert done.code == 0, done.err
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert any(name.endswith(":m+platt") for name in doc["exploratory"])
    rows = doc["per_card"]
    return {r["card_id"]: r["p_yes"] for r in rows if r["method"] == "m+platt"}


def test_a_units_own_outcome_does_not_shape_its_recalibration(run: Runner, tmp_path: Path) -> None:
    base = _recalibrated(run, tmp_path / "a", None)
    flipped = _recalibrated(run, tmp_path / "b", "c3")
    assert set(base) == {f"c{i}" for i in range(10)}
    assert flipped["c3"] == base["c3"]  # c3 is in its own fold
    assert any(flipped[c] != base[c] for c in base if c != "c3")  # the others learn from it


def test_an_unknown_method_is_refused(run: Runner, tmp_path: Path) -> None:
    preds, labels = _inputs(tmp_path)
    done = run("score", preds, "--labels", labels, "--recalibrate", "nope")
    assert done.code == 2 and "nope" in done.err


def _prereg(tmp_path: Path, **changes: object) -> Path:
    data: dict[str, object] = {
        "methods": ["m"],
        "baseline": "m",
        "comparisons": ["m:m+platt"],
        "recalibrate": ["m"],
        "bootstrap": {"n_resamples": 200, "seed": 1},
        **changes,
    }
    path = tmp_path / "prereg.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_preregistered_recalibration_is_confirmatory(run: Runner, tmp_path: Path) -> None:
    preds, labels = _inputs(tmp_path)
    lock = tmp_path / "prereg.lock.json"
    locked = run("prereg", "lock", _prereg(tmp_path), "--predictions", preds, "-o", lock)
    assert locked.code == 0, locked.err
    out = tmp_path / "score.json"
    done = run("score", preds, "--labels", labels, "--prereg", lock, "--json", out)
    assert done.code == 0, done.err
    doc = json.loads(out.read_text(encoding="utf-8"))
    registered = doc["prereg"]["statistics"]
    assert {"brier:m+platt", "delta_brier:m:m+platt", "bootstrap:m:m+platt"} <= set(registered)
    assert not any(
        name.endswith(":m+platt") and name.startswith("brier") for name in doc["exploratory"]
    )
    assert "m+platt" in doc["methods"]


def test_a_prereg_may_only_recalibrate_a_listed_method(run: Runner, tmp_path: Path) -> None:
    preds, _ = _inputs(tmp_path)
    bad = _prereg(tmp_path, recalibrate=["other"], comparisons=["m:other+platt"])
    done = run("prereg", "lock", bad, "--predictions", preds, "-o", tmp_path / "lock.json")
    assert done.code == 2 and "recalibrate names 'other'" in done.err
    assert not (tmp_path / "lock.json").exists()
