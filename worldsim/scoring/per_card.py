"""The per-card table behind every aggregate, with failure tags, as rows, CSV and Markdown.

One row per method and unit: a card at a forecast date (``unit`` is the card id unless a card
id was split into versions, see :mod:`worldsim.scoring.units`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from worldsim.scoring.analysis import Analysis, ScoreResult
from worldsim.scoring.audit import Audit
from worldsim.scoring.table import ScoredForecast
from worldsim.scoring.units import date_text

__all__ = [
    "AXES_COLUMNS",
    "COLUMNS",
    "card_tags",
    "leakage_tags",
    "per_card_columns",
    "per_card_csv",
    "per_card_markdown",
    "per_card_rows",
]

#: Columns of the per-card table, in order.
COLUMNS = (
    "card_id",
    "unit",
    "forecast_date",
    "method",
    "verified",
    "model",
    "prompt_version",
    "response_id",
    "extraction_rule",
    "n_replicates",
    "p_yes_raw",
    "p_yes",
    "p_options",
    "unresolved_mass",
    "outcome",
    "brier",
    "log",
    "correct",
    "tags",
)

#: Columns added with ``--hindsight``: replicate-averaged KER and source precision.
AXES_COLUMNS = ("ker", "srcp")


def per_card_columns(result: ScoreResult) -> tuple[str, ...]:
    """The per-card table's columns for this run (the axes columns only with ``--hindsight``)."""
    return COLUMNS + AXES_COLUMNS if result.axes is not None else COLUMNS


def card_tags(analysis: Analysis, tie_eps: Sequence[float]) -> dict[tuple[str, str], list[str]]:
    """Failure tags per (method, card), each naming the baseline it was found against.

    ``near-tie``: |Δ| below the smallest positive tie threshold. ``branch-dilution`` (binary):
    the baseline is within 0.1 of the label and the method moved toward 0.5 (or past it) by more
    than 0.25. ``both-wrong``: neither forecast is on the right side.
    """
    positive = [e for e in tie_eps if e > 0]
    smallest = min(positive) if positive else None
    tags: dict[tuple[str, str], list[str]] = {}
    for comp in analysis.comparisons:
        a = analysis.table.methods[comp.baseline]
        b = analysis.table.methods[comp.method]
        for card, delta in zip(comp.units, comp.deltas, strict=True):
            found: list[str] = []
            if smallest is not None and abs(delta) < smallest:
                found.append("near-tie")
            if _diluted(a[card], b[card]):
                found.append("branch-dilution")
            if not a[card].score.correct and not b[card].score.correct:
                found.append("both-wrong")
            if found:
                bucket = tags.setdefault((comp.method, card), [])
                bucket.extend(f"{tag} vs {comp.baseline}" for tag in found)
    return tags


def _diluted(base: ScoredForecast, other: ScoredForecast) -> bool:
    pa, pb = base.forecast.p_yes, other.forecast.p_yes
    if pa is None or pb is None:
        return False
    y = 1.0 if base.outcome == "yes" else 0.0
    if abs(pa - y) > 0.1:
        return False
    toward_half = (pa - pb) if pa > 0.5 else (pb - pa)
    return toward_half > 0.25


def leakage_tags(audit: Audit) -> dict[tuple[str, str], list[str]]:
    """``leakage`` per (method, unit) whose traces hold a label's masked entity: flagged, kept."""
    return {
        key: [f"leakage: {u.occurrences} occurrence(s) of a masked entity"]
        for key, u in audit.leaked.items()
    }


def per_card_rows(result: ScoreResult) -> list[dict[str, Any]]:
    """One row per (method, unit) of the unfiltered table, sorted by unit then method."""
    analysis = result.analysis
    axes = {(c.card_id, c.method): c for c in result.axes.cards} if result.axes else None
    tags = card_tags(analysis, result.tie_eps)
    for key, leaked in leakage_tags(result.audit).items():
        tags.setdefault(key, []).extend(leaked)
    rows: list[dict[str, Any]] = []
    for unit in analysis.table.units:
        for method in sorted(analysis.table.methods):
            sf = analysis.table.methods[method].get(unit)
            if sf is None:
                continue
            fc = sf.forecast
            row: dict[str, Any] = {
                "card_id": fc.card_id,
                "unit": unit,
                "forecast_date": date_text(fc.as_of) if fc.as_of is not None else None,
                "card_hash": fc.card_hash,
                "method": method,
                "verified": fc.verified,
                "model": fc.model,
                "prompt_version": fc.prompt_version,
                "response_id": fc.response_id,
                "extraction_rule": fc.extraction_rule,
                "n_replicates": fc.n_replicates,
                "run_ids": list(fc.run_ids),
                "p_yes_raw": fc.p_yes_raw,
                "p_yes": fc.p_yes,
                "p_options": dict(fc.p_options) if fc.p_options is not None else None,
                "unresolved_mass": fc.unresolved_mass,
                "outcome": sf.outcome,
                "brier": sf.score.brier,
                "log": sf.score.log,
                "correct": sf.score.correct,
                "tags": tags.get((method, unit), []),
            }
            if axes is not None:
                found = axes.get((unit, method))
                row["ker"] = found.ker if found is not None else None
                row["srcp"] = found.srcp if found is not None else None
            rows.append(row)
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict):
        return ";".join(f"{k}={_cell(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


def per_card_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row[c]) for c in columns])
    return buf.getvalue()


def per_card_markdown(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [_cell(row[c]).replace("|", "\\|") for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
