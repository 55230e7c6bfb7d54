"""A manifest is validated whole before anything runs: each kind of mistake is one line naming
the manifest and the field, exit 2, and nothing is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.study.conftest import CARDS, write_manifest
from worldsim.domain.errors import ConfigError
from worldsim.study.manifest import load_study

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]
RUN = {"policy": "no_branch", "model": "offline", "ticks": 2}

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown card", {"cards": ["nowhere.yaml"]}, "cards.0", "not found"),
    ("bad glob", {"cards": [CARDS[0], "none-*.yaml"]}, "cards.1", "matches no card"),
    (
        "duplicate label",
        {"methods": [{"label": "a", "run": RUN}, {"label": "a", "run": RUN}]},
        "methods.1.label",
        "duplicate label",
    ),
    (
        "unsafe label",
        {"methods": [{"label": "../up", "run": RUN}]},
        "methods.0.label",
        "pattern",
    ),
    (
        "unknown policy",
        {"methods": [{"label": "a", "run": {**RUN, "policy": "sideways"}}]},
        "methods.0.run.policy",
        "unknown policy",
    ),
    (
        "malformed route",
        {"methods": [{"label": "a", "run": {**RUN, "model": "no-slash"}}]},
        "methods.0.run.model",
        "",
    ),
    (
        "route without settings",
        {"methods": [{"label": "a", "forecast": {"model": "nokeyprov/m"}}]},
        "methods.0.forecast.model",
        "NOKEYPROV_BASE_URL",
    ),
    (
        "unknown condition",
        {"methods": [{"label": "a", "run": {**RUN, "condition": "psychic"}}]},
        "methods.0.run.condition",
        "",
    ),
    ("bad date keyword", {"forecast_dates": ["card", "someday"]}, "forecast_dates.1", "unknown"),
    (
        "field set by the study",
        {"methods": [{"label": "a", "run": {**RUN, "seed": 3}}]},
        "methods.0.run.seed",
        "set by the study",
    ),
    ("unknown top-level field", {"parallel": 3}, "parallel", "Extra inputs"),
]


@pytest.mark.parametrize(("what", "changes", "field", "words"), CASES, ids=[c[0] for c in CASES])
def test_each_mistake_names_the_manifest_and_field(
    what: str, changes: dict[str, Any], field: str, words: str, tmp_path: Path
) -> None:
    path = write_manifest(tmp_path, **changes)
    with pytest.raises(ConfigError) as info:
        load_study(path, environ={})
    assert info.value.file == str(path)
    assert info.value.field == field
    assert words in info.value.message


def test_a_date_outside_a_cards_window_is_an_error_before_anything_runs(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, forecast_dates=["1999-01-01"])
    out = tmp_path / "out"
    proc = subprocess.run(
        [*WORLDSIM, "batch", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "forecast_dates.0" in proc.stderr
    assert "outside its window" in proc.stderr
    assert not out.exists()


def test_cli_refuses_a_bad_manifest_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    path = write_manifest(
        tmp_path, methods=[{"label": "a", "run": RUN}, {"label": "a", "run": RUN}]
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [*WORLDSIM, "batch", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert str(path) in proc.stderr and "methods.1.label" in proc.stderr
    assert proc.stdout == ""
    assert not out.exists()


def test_two_forecast_dates_at_one_moment_of_a_card_are_refused(tmp_path: Path) -> None:
    """``card`` and the card's own as_of are the same jobs: given both, each unit would count
    one seed twice."""
    from worldsim.study.experiment import Experiment

    path = write_manifest(tmp_path, forecast_dates=["card", "2027-01-04"])
    with pytest.raises(ConfigError) as info:
        Experiment.from_yaml(path).jobs()
    assert (info.value.file, info.value.field) == (str(path), "forecast_dates.1")
    assert "is card's moment (2027-01-04T00:00:00Z): give it once" in info.value.message


def _labels(folder: Path, merger_resolved_at: str) -> Path:
    labels = folder / "labels"
    labels.mkdir()
    dates = {"merger-review": merger_resolved_at, "product-launch": "2027-06-01"}
    for card, resolved_at in dates.items():
        text = f"card_id: {card}\noutcome: 'yes'\nresolved_at: {resolved_at}\n"
        (labels / f"{card}.yaml").write_text(text, encoding="utf-8")
    return labels


def test_a_forecast_date_at_or_after_the_labels_resolution_is_refused(tmp_path: Path) -> None:
    """The answer was known by then: the evidence up to that date may hold it."""
    from worldsim.study.experiment import Experiment

    path = write_manifest(tmp_path, cards=CARDS[:1], forecast_dates=["card", "2027-02-10T12:00Z"])
    labels = _labels(tmp_path, "2027-02-10")
    with pytest.raises(ConfigError) as info:
        Experiment.from_yaml(path).jobs(labels)
    assert (info.value.file, info.value.field) == (str(path), "forecast_dates.1")
    assert "2027-02-10T00:00:00+00:00) (to its label's resolution)" in info.value.message
    assert len(Experiment.from_yaml(path).jobs()) == 8  # without labels, the deadline bounds it


def test_a_label_resolved_before_its_cards_window_opens_is_blamed_on_the_label(
    tmp_path: Path,
) -> None:
    from worldsim.study.experiment import Experiment

    path = write_manifest(tmp_path)
    labels = _labels(tmp_path, "2026-12-01")
    with pytest.raises(ConfigError) as info:
        Experiment.from_yaml(path).jobs(labels)
    assert info.value.file == str(labels / "merger-review.yaml")
    assert info.value.field == "resolved_at"
    assert "resolved at 2026-12-01, not after its forecast window opens (2027-01-04)" in str(
        info.value.message
    )
