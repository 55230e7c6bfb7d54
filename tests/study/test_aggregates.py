"""Seed aggregates: mean, median and logit-mean of p_yes per (card, method, forecast date)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from worldsim.scoring.aggregates import AGGREGATES, CLIP, aggregate
from worldsim.study.experiment import Experiment

probabilities = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12)


@given(probabilities)
def test_every_aggregate_lies_within_the_seeds(values: list[float]) -> None:
    low, high = min(values), max(values)
    for how in ("mean", "median"):
        assert low - 1e-12 <= aggregate(values, how) <= high + 1e-12  # type: ignore[arg-type]
    clipped = [min(max(v, CLIP), 1 - CLIP) for v in values]
    assert min(clipped) - 1e-12 <= aggregate(values, "logit_mean") <= max(clipped) + 1e-12


@given(st.floats(0.01, 0.99), st.integers(1, 9))
def test_equal_seeds_aggregate_to_themselves(p: float, n: int) -> None:
    for how in ("mean", "median", "logit_mean"):
        assert math.isclose(aggregate([p] * n, how), p, rel_tol=1e-9)  # type: ignore[arg-type]


def test_logit_mean_weighs_confident_seeds() -> None:
    assert aggregate([0.5, 0.99], "logit_mean") > aggregate([0.5, 0.99], "mean")


def test_a_study_writes_its_aggregates(manifest: Path, tmp_path: Path) -> None:
    rows = Experiment.from_yaml(manifest).run_sync(tmp_path / "study", fsync=False)
    table = list(csv.DictReader(io.StringIO((tmp_path / "study" / AGGREGATES).read_text())))
    groups = {(r.card_id, r.method, r.forecast_date) for r in rows if r.p_yes is not None}
    assert {(t["card_id"], t["method"], t["forecast_date"]) for t in table} == groups
    for t in table:
        seeds = [
            r.p_yes
            for r in rows
            if (r.card_id, r.method, r.forecast_date)
            == (t["card_id"], t["method"], t["forecast_date"])
            and r.p_yes is not None
        ]
        assert int(t["seeds"]) == len(seeds)
        assert math.isclose(float(t["mean"]), sum(seeds) / len(seeds), abs_tol=1e-6)
