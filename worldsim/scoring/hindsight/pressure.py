"""Causal pressure charts: real pressure on the question beside the simulated probability.

* Causal pressure: over dated hindsight events in date order (ties by position in the file),
  the running sum of direction × magnitude × confidence of each event's impacts, with
  positive = +1, negative = −1, and neutral = mixed = 0 (a mixed impact pushes both ways and
  has no net sign). Drawn as a step curve; undated events are left out.
* Market: an optional CSV ``date,price`` drawn on a second axis.
* Simulated pressure: per tick, the mass-weighted mean of ``p_yes_now`` over the timelines
  committed at that tick, Σ mass·p / Σ mass (timelines whose ``p_yes_now`` is null are left
  out of both sums).

The CSV behind the chart holds every point as ``series,date,value``. Plotting needs the
optional extra ``worldsim[plots]`` (matplotlib).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from worldsim.domain.cards import parse_utc, utc_iso
from worldsim.domain.errors import CardError, ConfigError
from worldsim.domain.files import write_files
from worldsim.domain.paths import missing_file
from worldsim.scoring.hindsight.forecast import RecordView
from worldsim.scoring.hindsight.graph import HindsightGraph

__all__ = [
    "DIRECTION_SIGN",
    "PRESSURE_TYPES",
    "PressurePoint",
    "causal_pressure",
    "read_market",
    "render_pressure",
    "require_matplotlib",
    "simulated_pressure",
    "write_pressure",
]

DIRECTION_SIGN: dict[str, float] = {
    "positive": 1.0,
    "negative": -1.0,
    "neutral": 0.0,
    "mixed": 0.0,
}

ImageFormat = Literal["png", "svg"]


@dataclass(frozen=True, slots=True)
class PressurePoint:
    date: datetime
    value: float


def causal_pressure(graph: HindsightGraph) -> list[PressurePoint]:
    """The cumulative causal pressure after each dated event."""
    dated = sorted(
        ((ev.date, i, ev.id) for i, ev in enumerate(graph.events) if ev.date is not None),
        key=lambda item: (item[0], item[1]),
    )
    total = 0.0
    points: list[PressurePoint] = []
    for date, _, event_id in dated:
        total += sum(
            DIRECTION_SIGN[im.direction] * im.magnitude * im.confidence
            for im in graph.impacts
            if im.event == event_id
        )
        points.append(PressurePoint(date=date, value=total))
    return points


PRESSURE_TYPES = frozenset({"tick_started", "tick_committed"})
"""The record types :func:`simulated_pressure` reads."""


def simulated_pressure(records: Iterable[RecordView]) -> list[PressurePoint]:
    """Mass-weighted ``p_yes_now`` per tick, dated by the tick's simulated date."""
    dates: dict[int, datetime] = {}
    sums: dict[int, list[float]] = {}
    for r in records:
        if r.tick is None:
            continue
        if r.type == "tick_started" and r.tick not in dates:
            try:
                dates[r.tick] = parse_utc(r.data.get("date"))
            except ValueError:
                continue
        elif r.type == "tick_committed":
            p, mass = r.data.get("p_yes_now"), r.data.get("mass")
            if not isinstance(p, int | float) or not isinstance(mass, int | float):
                continue
            acc = sums.setdefault(r.tick, [0.0, 0.0])
            acc[0] += float(mass) * float(p)
            acc[1] += float(mass)
    return [
        PressurePoint(date=dates[tick], value=num / den)
        for tick, (num, den) in sorted(sums.items())
        if den > 0 and tick in dates
    ]


def read_market(path: str | Path) -> list[PressurePoint]:
    """A market price series from a CSV with a header ``date,price``: each price a probability
    in [0, 1], as the build's markets reader takes them; a bad row is a `CardError` naming the
    file, line and field."""
    p = Path(path)
    if not p.is_file():
        raise missing_file(p, "market file", CardError)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CardError(f"cannot read market file: {exc}", file=p) from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [c.strip().lower() for c in rows[0][:2]] != ["date", "price"]:
        raise CardError("the first line must be the header 'date,price'", file=p, line=1)
    points: list[PressurePoint] = []
    for number, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 2:
            raise CardError("expected 'date,price'", file=p, line=number)
        try:
            when = parse_utc(row[0])
        except ValueError as exc:
            raise CardError(str(exc), file=p, line=number, field="date") from None
        try:
            price = float(row[1])
        except ValueError:
            message = f"not a number: {row[1]!r}"
            raise CardError(message, file=p, line=number, field="price") from None
        if not 0.0 <= price <= 1.0:  # also NaN
            message = f"price {row[1].strip()!r} is outside [0, 1]"
            raise CardError(message, file=p, line=number, field="price")
        points.append(PressurePoint(date=when, value=price))
    return sorted(points, key=lambda pt: pt.date)


def require_matplotlib() -> None:
    """Raise a one-line :class:`ConfigError` when the ``plots`` extra is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(
            "charts need matplotlib: install the extra with pip install 'worldsim[plots]'"
        ) from None


def _csv_text(series: dict[str, list[PressurePoint]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["series", "date", "value"])
    for name, points in series.items():
        for pt in points:
            writer.writerow([name, utc_iso(pt.date), repr(pt.value)])
    return buffer.getvalue()


def _xy(points: list[PressurePoint]) -> tuple[list[datetime], list[float]]:
    """A series as a chart takes it: its dates, then its values."""
    return [p.date for p in points], [p.value for p in points]


def render_pressure(
    causal: list[PressurePoint],
    market: list[PressurePoint],
    simulated: list[PressurePoint],
    *,
    title: str,
    image_format: ImageFormat = "png",
) -> bytes:
    """The chart as image bytes: causal pressure (and market) left, simulated p_yes right."""
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.5), layout="constrained")
    left, right = fig.subplots(1, 2)
    if causal:
        left.step(*_xy(causal), where="post", color="tab:blue", label="causal pressure")
    left.axhline(0.0, color="grey", linewidth=0.6)
    left.set_title("Hindsight causal pressure")
    left.set_ylabel("cumulative direction × magnitude × confidence")
    handles: list[Any] = list(left.get_legend_handles_labels()[0])
    if market:
        twin = left.twinx()
        (line,) = twin.plot(*_xy(market), color="tab:orange", label="market price")
        twin.set_ylabel("market price")
        handles.append(line)
    if handles:
        left.legend(handles=handles, loc="upper left")
    if simulated:
        right.step(
            *_xy(simulated),
            where="post",
            color="tab:green",
            label="simulated p(yes), mass-weighted",
        )
    else:
        right.text(
            0.5,
            0.5,
            "no simulated series (give --trace)",
            transform=right.transAxes,
            ha="center",
            va="center",
            color="grey",
        )
    if market:
        right.plot(*_xy(market), color="tab:orange", alpha=0.5, label="market price")
    if not market or max(p.value for p in market) <= 1.0:
        right.set_ylim(0.0, 1.0)
    right.set_title("Simulated pressure")
    right.set_ylabel("probability")
    if simulated or market:
        right.legend(loc="upper left")
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=30)
    fig.suptitle(title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=image_format)
    return buffer.getvalue()


def write_pressure(
    out_dir: str | Path,
    graph: HindsightGraph,
    *,
    records: list[RecordView] | None = None,
    market: list[PressurePoint] | None = None,
    image_format: ImageFormat = "png",
    stem: str = "pressure",
) -> list[Path]:
    """Render the chart and write it with its CSV into ``out_dir``; returns the files written.

    The image is rendered in memory first, so a failure leaves nothing behind.
    """
    causal = causal_pressure(graph)
    simulated = simulated_pressure(records or [])
    market_points = market or []
    title = graph.card_id or graph.question or "hindsight"
    image = render_pressure(
        causal, market_points, simulated, title=title, image_format=image_format
    )
    table = _csv_text({"causal": causal, "market": market_points, "simulated": simulated})
    out = Path(out_dir)
    image_path = out / f"{stem}.{image_format}"
    csv_path = out / f"{stem}.csv"
    write_files({csv_path: table.encode("utf-8"), image_path: image})
    return [image_path, csv_path]
