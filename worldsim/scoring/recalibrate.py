"""Cross-validated Platt recalibration of a method's binary forecasts, as an extra method.

``METHOD+platt`` forecasts each unit with ``sigmoid(a · logit(p) + b)``, where ``a`` and ``b``
are fitted by maximum likelihood (Newton's method, with a small ridge that keeps them finite
when the training outcomes are separable) on the *other* cards' units only: the cards, sorted,
are dealt round-robin into ``min(5, n)`` folds and each fold is predicted by a fit on the rest,
so no unit's own outcome shapes its recalibrated forecast. ``p`` is clipped to
[0.001, 0.999] before the logit. Multiple-choice units are left out. The row is exploratory
unless a locked prereg names the method under ``recalibrate:``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from worldsim.domain.errors import ConfigError
from worldsim.scoring.table import MatchedTable, ScoredForecast, score_like

__all__ = ["FOLDS", "SUFFIX", "add_recalibrated", "platt_fit"]

SUFFIX = "+platt"
FOLDS = 5
_CLIP = 1e-3
_RIDGE = 1e-3


def _logit(p: float) -> float:
    q = min(max(p, _CLIP), 1 - _CLIP)
    return math.log(q / (1 - q))


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def platt_fit(pairs: Sequence[tuple[float, int]]) -> tuple[float, float]:
    """``(a, b)`` maximising the likelihood of outcomes ``y`` given ``sigmoid(a·logit(p)+b)``
    (plus a ridge of 0.001 on both)."""
    a, b = 1.0, 0.0
    xs = [(_logit(p), y) for p, y in pairs]
    for _ in range(100):
        haa, hab, hbb = _RIDGE, 0.0, _RIDGE
        ga, gb = _RIDGE * (a - 1.0), _RIDGE * b
        for x, y in xs:
            q = _sigmoid(a * x + b)
            ga += (q - y) * x
            gb += q - y
            w = q * (1 - q)
            haa += w * x * x
            hab += w * x
            hbb += w
        det = haa * hbb - hab * hab
        if det <= 0:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        a, b = a - da, b - db
        if abs(da) < 1e-10 and abs(db) < 1e-10:
            break
    return a, b


def add_recalibrated(table: MatchedTable, methods: Sequence[str]) -> MatchedTable:
    """Add ``METHOD+platt`` for each of ``methods`` (see the module's doc)."""
    added = dict(table.methods)
    for method in methods:
        name = method + SUFFIX
        if method not in table.methods:
            raise ConfigError(f"unknown method '{method}' to recalibrate", field="--recalibrate")
        if name in added:
            raise ConfigError(f"'{name}' is already a method", field="--recalibrate")
        units = {
            unit: sf
            for unit, sf in table.methods[method].items()
            if sf.forecast.kind == "binary" and sf.forecast.p_yes is not None
        }
        cards = sorted({sf.forecast.card_id for sf in units.values()})
        if len(cards) < 2:
            raise ConfigError(
                f"recalibrating '{method}' needs binary forecasts of two or more cards",
                field="--recalibrate",
            )
        fold_of = {card: i % min(FOLDS, len(cards)) for i, card in enumerate(cards)}
        rows: dict[str, ScoredForecast] = {}
        for unit, sf in sorted(units.items()):
            fold = fold_of[sf.forecast.card_id]
            train = [
                (o.forecast.p_yes or 0.0, 1 if o.outcome == "yes" else 0)
                for o in units.values()
                if fold_of[o.forecast.card_id] != fold
            ]
            a, b = platt_fit(train)
            p = _sigmoid(a * _logit(sf.forecast.p_yes or 0.0) + b)
            rows[unit] = score_like(sf, replace(sf.forecast, method=name, p_yes=p))
        added[name] = rows
    return replace(table, methods=added)
