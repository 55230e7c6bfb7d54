"""Provisional labels: an unresolved market row of a resolution set holds the market's value.
It is scored by Brier only (the other metrics leave it out and say so) and its date is never a
resolution date (forecast windows, ``near_resolution``)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from tests.support import invoke
from worldsim.domain.cards import load_card
from worldsim.domain.forecastbench import MARKET_SOURCES
from worldsim.domain.labels import Label
from worldsim.study.dates import forecast_date
from worldsim.study.runner import resolution_dates

DATA = Path(__file__).parent / "data"
LLM = DATA / "2025-10-26-llm.json"
RESOLUTIONS = DATA / "2025-10-26_resolution_set.json"


def _round(tmp_path: Path) -> tuple[Path, Path, dict[str, dict[str, Any]]]:
    cards, labels = tmp_path / "cards", tmp_path / "labels"
    assert invoke("cards", "import", LLM, "-o", cards).code == 0
    assert invoke("cards", "labels", RESOLUTIONS, "-o", labels, "--cards", cards).code == 0
    made = {p.stem: yaml.safe_load(p.read_text()) for p in labels.glob("*.yaml")}
    return cards, labels, made


def test_a_provisional_label_holds_a_value_and_no_resolution_date() -> None:
    label = Label(card_id="m", outcome="provisional", value=0.4, valued_at="2026-08-19")
    assert label.provisional and label.resolved_at is None
    with pytest.raises(ValidationError, match="value"):
        Label(card_id="m", outcome="provisional")
    with pytest.raises(ValidationError, match="resolved_at"):
        Label(card_id="m", outcome="provisional", value=0.4, resolved_at="2026-08-19")
    with pytest.raises(ValidationError, match="only a provisional label"):
        Label(card_id="m", outcome="yes", value=0.4)


def test_a_provisional_date_is_never_a_resolution_date(tmp_path: Path) -> None:
    cards, labels, made = _round(tmp_path)
    open_id = next(k for k, v in made.items() if v["outcome"] == "provisional")
    closed_id = next(
        k for k, v in made.items() if v["outcome"] in ("yes", "no") and k.startswith("polymarket")
    )
    dates = resolution_dates(labels, [load_card(cards / f"{i}.yaml") for i in (open_id, closed_id)])
    assert dates[open_id] is None
    assert dates[closed_id] is not None
    card = load_card(cards / f"{open_id}.yaml")
    near = forecast_date(card, "near_resolution", dates[open_id])
    assert near == card.deadline - timedelta(days=1)


def test_score_counts_provisional_labels_in_brier_only_and_says_so(tmp_path: Path) -> None:
    """A direct offline study of resolved and still-open market cards: log loss and accuracy
    are over the resolved cards; the open ones add a Brier figure of their own, the forecast
    against the market's value."""
    cards, labels, made = _round(tmp_path)
    open_ids = sorted(k for k, v in made.items() if v["outcome"] == "provisional")[:3]
    closed_ids = sorted(
        k
        for k, v in made.items()
        if v["outcome"] in ("yes", "no") and k.split("-")[0] in MARKET_SOURCES
    )[:3]
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    for card_id in open_ids + closed_ids:
        (chosen / f"{card_id}.yaml").write_bytes((cards / f"{card_id}.yaml").read_bytes())
    manifest = tmp_path / "study.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": "open-and-closed",
                "cards": [str(chosen / "*.yaml")],
                "seeds": [0],
                "methods": [{"label": "direct", "forecast": {"model": "offline"}}],
            }
        ),
        encoding="utf-8",
    )
    study = tmp_path / "study"
    assert invoke("batch", manifest, "--out", study).code == 0
    report = tmp_path / "score.json"
    done = invoke("score", study, "--labels", labels, "--json", report)
    assert done.code == 0, done.err
    assert "provisional labels: direct 3 unit(s)" in done.out
    assert "log loss, accuracy" in done.out
    doc = json.loads(report.read_text())
    assert doc["methods"]["direct"]["n"] == 3
    prov = doc["provisional"]["methods"]["direct"]
    priors = {c: load_card(chosen / f"{c}.yaml").seeds.base_rate for c in open_ids}  # type: ignore[union-attr]
    expected = [(priors[c] - made[c]["value"]) ** 2 for c in open_ids]
    assert prov["n"] == 3 and prov["brier"] == pytest.approx(sum(expected) / 3)
    resolved = doc["methods"]["direct"]["brier"] * 3
    assert prov["brier_with_provisional"] == pytest.approx((resolved + sum(expected)) / 6)
