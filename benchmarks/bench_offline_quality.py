"""Forecast quality of the offline model on the demo cards: Brier against the base rate.

Every demo card (``scenarios/*.yaml``) runs under ``no_branch`` and ``branching`` for seeds
0..9 (0..3 with ``--quick``) through the library API, and each run's forecast is scored against
the card's label (``scenarios/labels/``) with the scoring module's rules: binary Brier
``(p − y)²`` on ``p_yes``, multi-class Brier ``Σ_k (p_k − y_k)²`` on ``p_options``. Two
references come from the card alone: its own ``seeds.base_rate`` (``base_rates`` for multiple
choice) and a coin flip (uniform over the options).

"mean Brier" is the Brier of each replicate's forecast averaged over seeds; "Brier of mean" is
the Brier of the forecast averaged over seeds (never larger, by convexity). The aggregate row is
the mean over cards of each column.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import run_async
from worldsim.domain.cards import Card, load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.labels import load_labels
from worldsim.scoring.metrics import binary_scores, multiclass_scores
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult

__all__ = ["POLICIES", "base_rate_forecast", "brier", "rows", "run"]

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
POLICIES = ("no_branch", "branching")

Forecast = float | Mapping[str, float]


def base_rate_forecast(card: Card) -> Forecast:
    """The card's own prior: ``seeds.base_rate`` (binary) or ``seeds.base_rates``."""
    options = [ep.id for ep in card.scored_endpoints]
    seeds = card.seeds
    if card.kind == "binary":
        return seeds.base_rate if seeds is not None and seeds.base_rate is not None else 0.5
    if seeds is not None and seeds.base_rates is not None:
        return {o: float(seeds.base_rates[o]) for o in options}
    return dict.fromkeys(options, 1.0 / len(options))


def coin_flip_forecast(card: Card) -> Forecast:
    if card.kind == "binary":
        return 0.5
    options = [ep.id for ep in card.scored_endpoints]
    return dict.fromkeys(options, 1.0 / len(options))


def brier(forecast: Forecast, outcome: str) -> float:
    """Binary or multi-class Brier of ``forecast`` against the label's outcome."""
    if isinstance(forecast, float | int):
        return binary_scores(float(forecast), 1 if outcome == "yes" else 0).brier
    return multiclass_scores(sorted(forecast.items()), outcome).brier


def _forecast(result: RunResult) -> Forecast:
    if result.p_options is not None:
        return dict(result.p_options)
    assert result.p_yes is not None
    return result.p_yes


def _mean_forecast(forecasts: Sequence[Forecast]) -> Forecast:
    first = forecasts[0]
    if isinstance(first, Mapping):
        return {
            o: statistics.fmean(f[o] for f in forecasts if isinstance(f, Mapping)) for o in first
        }
    return statistics.fmean(float(f) for f in forecasts if not isinstance(f, Mapping))


def _headline(forecast: Forecast, outcome: str) -> float:
    """The forecast's probability of what happened: p_yes, 1 − p_yes, or p of the true option."""
    if isinstance(forecast, Mapping):
        return float(forecast.get(outcome, 0.0))
    return float(forecast) if outcome == "yes" else 1.0 - float(forecast)


def _run(card: Card, path: Path, policy: str, seed: int, out: Path) -> RunResult:
    config = RunConfig(card=card, policy=load_policy(policy), seed=seed, card_path=path)

    async def go() -> RunResult:
        return await run_card(config, out, overwrite=True, fsync=False)

    return run_async(go)


def run(quick: bool = False) -> dict[str, Any]:
    seeds = list(range(4 if quick else 10))
    labels = load_labels(SCENARIOS / "labels").entries
    cards: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="worldsim-quality-") as tmp:
        for path in sorted(SCENARIOS.glob("*.yaml")):
            card = load_card(path)
            outcome = labels[card.id].outcome
            entry: dict[str, Any] = {
                "card": card.id,
                "kind": card.kind,
                "outcome": outcome,
                "base_rate": base_rate_forecast(card),
                "base_rate_brier": brier(base_rate_forecast(card), outcome),
                "coin_flip_brier": brier(coin_flip_forecast(card), outcome),
                "policies": {},
            }
            for policy in POLICIES:
                forecasts = [_forecast(_run(card, path, policy, s, Path(tmp))) for s in seeds]
                briers = [brier(f, outcome) for f in forecasts]
                p_true = [_headline(f, outcome) for f in forecasts]
                mean = _mean_forecast(forecasts)
                entry["policies"][policy] = {
                    "forecasts": forecasts,
                    "briers": briers,
                    "mean_brier": statistics.fmean(briers),
                    "brier_of_mean": brier(mean, outcome),
                    "mean_forecast": mean,
                    "p_true_min": min(p_true),
                    "p_true_max": max(p_true),
                    "p_true_sd": statistics.pstdev(p_true),
                }
            cards.append(entry)

    def across(key: str, policy: str | None = None) -> float:
        values = [c["policies"][policy][key] if policy else c[key] for c in cards]
        return math.fsum(values) / len(values)

    aggregate: dict[str, Any] = {
        "base_rate_brier": across("base_rate_brier"),
        "coin_flip_brier": across("coin_flip_brier"),
        "policies": {
            p: {
                "mean_brier": across("mean_brier", p),
                "brier_of_mean": across("brier_of_mean", p),
                "p_true_sd": across("p_true_sd", p),
            }
            for p in POLICIES
        },
    }
    aggregate["floor_holds"] = all(
        aggregate["policies"][p]["mean_brier"] <= aggregate["base_rate_brier"] for p in POLICIES
    )
    return {
        "what": "offline model forecasts on the demo cards, scored against their labels",
        "seeds": seeds,
        "policies": list(POLICIES),
        "cards": cards,
        "aggregate": aggregate,
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = []
    for c in result["cards"]:
        row: dict[str, Any] = {"card": c["card"], "outcome": c["outcome"]}
        for p in result["policies"]:
            stats = c["policies"][p]
            row[f"{p} mean Brier"] = stats["mean_brier"]
            row[f"{p} Brier of mean"] = stats["brier_of_mean"]
            row[f"{p} p(true) min–max"] = f"{stats['p_true_min']:.2f}–{stats['p_true_max']:.2f}"
        row["base rate"] = c["base_rate_brier"]
        row["coin flip"] = c["coin_flip_brier"]
        body.append(row)
    agg = result["aggregate"]
    row = {"card": "mean over cards", "outcome": ""}
    for p in result["policies"]:
        row[f"{p} mean Brier"] = agg["policies"][p]["mean_brier"]
        row[f"{p} Brier of mean"] = agg["policies"][p]["brier_of_mean"]
        row[f"{p} p(true) min–max"] = f"sd {agg['policies'][p]['p_true_sd']:.2f}"
    row["base rate"] = agg["base_rate_brier"]
    row["coin flip"] = agg["coin_flip_brier"]
    body.append(row)
    return body
