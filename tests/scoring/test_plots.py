"""Figures with the CSV behind each, and a clean failure when matplotlib is missing."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from tests.scoring.conftest import Runner, write_csv


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    cards = [f"c{i}" for i in range(8)]
    preds = write_csv(
        tmp_path / "p.csv",
        ["card_id", "method", "p_yes"],
        [(c, "a", f"{0.1 + 0.1 * i:.1f}") for i, c in enumerate(cards)]
        + [(c, "b", "0.5") for c in cards],
    )
    labels = write_csv(
        tmp_path / "l.csv",
        ["card_id", "outcome"],
        [(c, "yes" if i % 2 else "no") for i, c in enumerate(cards)],
    )
    return preds, labels


def test_plots_write_figures_and_their_data(
    run: Runner, tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    pytest.importorskip("matplotlib")
    preds, labels = inputs
    plots = tmp_path / "plots"
    result = run(
        "score",
        preds,
        "--labels",
        labels,
        "--compare",
        "b:a",
        "--bootstrap",
        "200",
        "--plots",
        plots,
    )
    assert result.code == 0, result.err
    names = sorted(p.name for p in plots.iterdir())
    assert names == [
        "forest_b_vs_a.csv",
        "forest_b_vs_a.png",
        "reliability_a.csv",
        "reliability_a.png",
        "reliability_b.csv",
        "reliability_b.png",
    ]
    for png in plots.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (plots / "reliability_a.csv").open() as fh:
        bins = list(csv.DictReader(fh))
    assert len(bins) == 10 and sum(int(b["count"]) for b in bins) == 8
    with (plots / "forest_b_vs_a.csv").open() as fh:
        forest = list(csv.DictReader(fh))
    assert [r["card_id"] for r in forest][-3:] == ["(mean)", "(ci_lo)", "(ci_hi)"]
    assert len(forest) == 8 + 3


def test_missing_matplotlib_fails_cleanly_before_writing_anything(
    run: Runner, tmp_path: Path, inputs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("matplotlib", "matplotlib.backends.backend_agg", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)  # makes ``import`` raise ImportError
    preds, labels = inputs
    plots, out = tmp_path / "plots", tmp_path / "s.json"
    result = run("score", preds, "--labels", labels, "--plots", plots, "--json", out)
    assert result.code == 2
    assert "worldsim[plots]" in result.err and len(result.err.strip().splitlines()) == 1
    assert not plots.exists() and not out.exists()
