"""The paired effect of an intervention: per (card, forecast date, seed) the treatment
method's p_yes minus the control method's, their mean and a bootstrap interval. No labels are
needed: it measures how much the intervention moved the forecast, not whether it was right.

Pairs are the jobs both methods completed with a binary forecast. The interval is the one
bootstrap of :func:`worldsim.scoring.paired.bootstrap_mean` over the pairs, as a paired
comparison's over cards.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from worldsim.domain.errors import ConfigError
from worldsim.scoring.paired import DEFAULT_RESAMPLES, bootstrap_mean

__all__ = ["Effect", "paired_effect", "parse_effect"]


@dataclass(frozen=True, slots=True)
class Effect:
    control: str
    treatment: str
    n_pairs: int
    mean_diff: float
    low: float
    high: float
    level: float
    n_resamples: int
    seed: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_effect(text: str) -> tuple[str, str]:
    """``CONTROL:TREATMENT``, two different method labels."""
    control, sep, treatment = text.partition(":")
    if not sep or not control or not treatment or control == treatment:
        raise ConfigError(f"{text!r} is not CONTROL:TREATMENT (two methods)", field="--effect")
    return control, treatment


def paired_effect(
    rows: Iterable[Mapping[str, Any]],
    control: str,
    treatment: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> Effect:
    """The effect of ``treatment`` against ``control`` over a study's job rows (numbers read
    from their verified traces)."""
    forecasts: dict[str, dict[tuple[str, str, int], float]] = {control: {}, treatment: {}}
    methods: set[str] = set()
    for row in rows:
        methods.add(str(row.get("method")))
        if row.get("method") in forecasts and row.get("status") == "complete":
            p = row.get("p_yes")
            if isinstance(p, int | float):
                key = (str(row["card_id"]), str(row["forecast_date"]), int(row["seed"]))
                forecasts[str(row["method"])][key] = float(p)
    for name in (control, treatment):
        if name not in methods:
            raise ConfigError(
                f"no method '{name}' in this study (it has {', '.join(sorted(methods))})",
                field="--effect",
            )
    keys = sorted(set(forecasts[control]) & set(forecasts[treatment]))
    if not keys:
        raise ConfigError(
            f"'{control}' and '{treatment}' share no completed binary job to pair",
            field="--effect",
        )
    diffs = [forecasts[treatment][k] - forecasts[control][k] for k in keys]
    interval = bootstrap_mean(diffs, n_resamples=n_resamples, seed=seed, level=level)
    mean = math.fsum(diffs) / len(diffs)
    return Effect(
        control, treatment, len(keys), mean, interval.lo, interval.hi, level, n_resamples, seed
    )
