"""A study's score tables: per method, per condition and per forecast date, and accuracy by
date for each method (the temporal-sensitivity curve).

The unit is a (card, forecast date) pair: a method's seeds of one card and date are averaged
into one forecast (as ``worldsim score`` averages replicates), scored against the card's label,
and the scores are averaged over the units a row of the table covers. Different forecast dates
of one card are never pooled into one forecast.

With hindsight graphs (``score --hindsight``) a unit also carries the mean KER and SrcP of its
seeds' traces, each only where the condition defines it, as in WorldReasoner's tables: KER
where the condition builds the forecast-time graph (``causal_simulation``, ``search_graph``,
``near_resolution``), SrcP where its agents searched (``search``, ``search_graph``,
``near_resolution``); elsewhere (and for the direct baseline) it is None, printed "—".
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsim.domain.config import GRAPH_CONDITIONS, RETRIEVAL_CONDITIONS
from worldsim.scoring.axes import AxisMeans, TraceAxes
from worldsim.scoring.labels import LabelSet
from worldsim.scoring.metrics import CardScore, binary_scores, multiclass_scores

__all__ = ["StudyTables", "Unit", "accuracy_by_date_plot", "study_tables"]


@dataclass(frozen=True, slots=True)
class Unit:
    """One method's seed-averaged forecast of one card at one forecast date, scored."""

    card_id: str
    method: str
    condition: str
    forecast_date: str
    seeds: int
    score: CardScore
    ker: float | None = None
    """Mean KER of the seeds' traces; None without hindsight or where the condition has none."""
    srcp: float | None = None
    """Mean SrcP of the seeds' traces; None without hindsight or where nothing was retrieved."""


@dataclass(frozen=True, slots=True)
class StudyTables:
    """Mean Brier, log loss and accuracy over units, grouped three ways, and by date."""

    units: tuple[Unit, ...]
    dates: tuple[str, ...]
    hindsight: bool = False
    """Whether KER and SrcP were computed (``score --hindsight``)."""

    def by(self, key: str) -> dict[str, tuple[int, float, float, float]]:
        """Group key → (units, mean Brier, mean log loss, accuracy)."""
        groups: dict[str, list[CardScore]] = defaultdict(list)
        for unit in self.units:
            groups[str(getattr(unit, key))].append(unit.score)
        return {name: _means(scores) for name, scores in sorted(groups.items())}

    def axes_by(self, key: str) -> dict[str, AxisMeans]:
        """Group key → mean KER and SrcP over the group's units where they are defined."""
        groups: dict[str, list[Unit]] = defaultdict(list)
        for unit in self.units:
            groups[str(getattr(unit, key))].append(unit)
        return {name: AxisMeans.of(units) for name, units in sorted(groups.items())}

    def to_json(self) -> dict[str, Any]:
        """The tables as the JSON report's ``studies`` entry holds them."""
        doc: dict[str, Any] = {}
        for key in ("method", "condition", "forecast_date"):
            axes = self.axes_by(key)
            doc[f"by_{key}"] = {
                name: {
                    "units": n,
                    "brier": brier,
                    "log": log,
                    "accuracy": acc,
                    **(_axes_json(axes[name]) if self.hindsight else {}),
                }
                for name, (n, brier, log, acc) in self.by(key).items()
            }
        doc["dates"] = list(self.dates)
        doc["accuracy_by_date"] = self.accuracy_by_date()
        doc["brier_by_date"] = self.brier_by_date()
        return doc

    def accuracy_by_date(self) -> dict[str, dict[str, float]]:
        """Method → forecast date → accuracy."""
        return self._by_date(3)

    def brier_by_date(self) -> dict[str, dict[str, float]]:
        """Method → forecast date → mean Brier: a rolling method beside the same method
        restarted at each date (docs/experiments.md)."""
        return self._by_date(1)

    def _by_date(self, column: int) -> dict[str, dict[str, float]]:
        cells: dict[str, dict[str, list[CardScore]]] = defaultdict(lambda: defaultdict(list))
        for unit in self.units:
            cells[unit.method][unit.forecast_date].append(unit.score)
        return {
            method: {date: _means(scores)[column] for date, scores in by_date.items()}
            for method, by_date in sorted(cells.items())
        }


def _axes_json(means: AxisMeans) -> dict[str, Any]:
    return {"ker": means.ker, "ker_n": means.ker_n, "srcp": means.srcp, "srcp_n": means.srcp_n}


def _unit_axes(
    condition: str, rows: list[Mapping[str, object]], axes: Mapping[Path, TraceAxes]
) -> tuple[float | None, float | None]:
    """The unit's mean KER and SrcP over its seeds' traces, each where the condition has it."""
    traced = [axes.get(Path(str(r["trace"]))) for r in rows]
    found = [t for t in traced if t is not None]
    means = AxisMeans.of(found)
    ker = means.ker if condition in GRAPH_CONDITIONS else None
    srcp = means.srcp if condition in RETRIEVAL_CONDITIONS else None
    return ker, srcp


def _means(scores: Sequence[CardScore]) -> tuple[int, float, float, float]:
    n = len(scores)
    return (
        n,
        math.fsum(s.brier for s in scores) / n,
        math.fsum(s.log for s in scores) / n,
        sum(s.correct for s in scores) / n,
    )


def _mean_options(rows: list[Mapping[str, object]]) -> list[tuple[str, float]]:
    options: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        for key, value in dict(row["p_options"]).items():  # type: ignore[call-overload]
            options[str(key)].append(float(value))
    return sorted((key, math.fsum(ps) / len(rows)) for key, ps in options.items())


def study_tables(
    rows: Iterable[Mapping[str, object]],
    labels: LabelSet,
    axes: Mapping[Path, TraceAxes] | None = None,
) -> StudyTables:
    """Score a study's complete job rows (each its job's card, method, condition, forecast
    date, status, forecast and resolved ``trace`` path, in job order: numbers read from its
    verified trace); cards without a label, or whose label is provisional, are left out.

    ``axes`` are the traces' KER and SrcP (by resolved trace path, from ``score
    --hindsight``); without them the tables have no KER or SrcP."""
    groups: dict[tuple[str, str, str, str], list[Mapping[str, object]]] = defaultdict(list)
    dates: list[str] = []
    for row in rows:
        date = str(row["forecast_date"])
        if date not in dates:
            dates.append(date)
        entry = labels.entries.get(str(row["card_id"]))
        if row.get("status") != "complete" or entry is None or entry.label.provisional:
            continue  # a provisional label (a question still open) is scored by Brier only
        key = (str(row["card_id"]), str(row["method"]), str(row["condition"]), date)
        groups[key].append(row)
    units: list[Unit] = []
    for (card, method, condition, date), rows in sorted(groups.items()):
        outcome = labels.entries[card].outcome
        if rows[0].get("p_yes") is not None:
            p = math.fsum(float(r["p_yes"]) for r in rows) / len(rows)  # type: ignore[arg-type]
            score = binary_scores(p, 1 if outcome == "yes" else 0)
        else:
            score = multiclass_scores(_mean_options(rows), outcome)
        ker, srcp = _unit_axes(condition, rows, axes) if axes is not None else (None, None)
        units.append(Unit(card, method, condition, date, len(rows), score, ker, srcp))
    return StudyTables(tuple(units), tuple(dates), hindsight=axes is not None)


def accuracy_by_date_plot(tables: StudyTables) -> dict[str, bytes]:
    """The temporal-sensitivity figure (``accuracy_by_date.png``, needs matplotlib) and its
    data (``accuracy_by_date.csv``): each method's accuracy at each forecast date, in the
    manifest's date order."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    curves = tables.accuracy_by_date()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["method", "forecast_date", "accuracy"])
    fig = Figure(figsize=(6.0, 4.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for method, by_date in curves.items():
        dates = [d for d in tables.dates if d in by_date]
        writer.writerows([method, d, by_date[d]] for d in dates)
        ax.plot(dates, [by_date[d] for d in dates], marker="o", label=method)
    ax.set(ylim=(-0.02, 1.02), xlabel="forecast date", ylabel="accuracy")
    ax.set_title("accuracy by forecast date")
    if curves:
        ax.legend(fontsize=8)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120, bbox_inches="tight")
    return {
        "accuracy_by_date.csv": buffer.getvalue().encode(),
        "accuracy_by_date.png": png.getvalue(),
    }
