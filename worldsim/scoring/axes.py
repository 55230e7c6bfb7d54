"""Three-axis evaluation: outcome, evidence (source precision) and reasoning (KER) per method.

For every scored card whose hindsight graph ``DIR/<card_id>.json`` exists, each trace behind the
card's forecast is scored against the graph with :mod:`worldsim.scoring.hindsight`: key-event
recall of its simulated events and source precision of its logged accesses. Replicate traces
of one card and method are averaged (each figure over the traces where it is defined) and
counted. Forecasts read from prediction tables, blends and the uniform reference have no
trace, so no KER or SrcP.

Per method the axes are: outcome (accuracy, Brier, log loss over its scored cards), evidence
(mean SrcP over its cards) and reasoning (mean KER and mass-weighted recall), and the split of
KER and SrcP by whether the forecast was correct.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from worldsim.domain.errors import ConfigError
from worldsim.domain.files import sha256_file
from worldsim.scoring.hindsight import DEFAULT_DATE_WINDOW_DAYS
from worldsim.scoring.hindsight.evidence import ACCESS_TYPES, source_precision
from worldsim.scoring.hindsight.forecast import (
    GRAPH_TYPES,
    forecast_graph_of,
    stream_records,
    trace_records,
)
from worldsim.scoring.hindsight.graph import HindsightGraph, check_graph, load_hindsight
from worldsim.scoring.hindsight.ker import key_event_recall
from worldsim.scoring.inputs import PredictionRow
from worldsim.scoring.metrics import MethodSummary
from worldsim.scoring.table import MatchedTable

__all__ = [
    "Axes",
    "AxisMeans",
    "CardAxes",
    "GraphFile",
    "MethodAxes",
    "TraceAxes",
    "compute_axes",
    "load_graphs",
]


@dataclass(frozen=True, slots=True)
class GraphFile:
    """A hindsight graph read for a scored card, with its hash and quality warnings."""

    card_id: str
    path: Path
    sha256: str
    graph: HindsightGraph
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TraceAxes:
    """KER and source precision of one trace against its card's hindsight graph."""

    source: str
    run_id: str | None
    ker: float | None
    mass_weighted_recall: float | None
    n_key_events: int
    n_matched_key_events: int
    srcp: float | None
    n_accessed: int
    n_relevant: int


def _mean(values: Iterable[float | None]) -> tuple[float | None, int]:
    """The mean of the defined values and how many there were (None, 0 when none)."""
    known = [v for v in values if v is not None]
    return (math.fsum(known) / len(known), len(known)) if known else (None, 0)


class _OnTheAxes(Protocol):
    """What has a KER and a SrcP, each None where undefined: a trace, a card, a study's unit."""

    @property
    def ker(self) -> float | None: ...
    @property
    def srcp(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class AxisMeans:
    """Mean KER and SrcP over a group of ``n`` (traces, cards or units) where each is defined,
    and over how many."""

    n: int
    ker: float | None
    ker_n: int
    srcp: float | None
    srcp_n: int

    @classmethod
    def of(cls, group: Sequence[_OnTheAxes]) -> AxisMeans:
        ker, ker_n = _mean(g.ker for g in group)
        srcp, srcp_n = _mean(g.srcp for g in group)
        return cls(n=len(group), ker=ker, ker_n=ker_n, srcp=srcp, srcp_n=srcp_n)


@dataclass(frozen=True, slots=True)
class CardAxes:
    """One method's forecast of one unit on the evidence and reasoning axes."""

    card_id: str
    """The unit id: the card id, or ``card@date`` when a card id was split into versions."""
    method: str
    correct: bool
    graph: GraphFile | None
    traces: tuple[TraceAxes, ...] = ()

    @property
    def scored(self) -> bool:
        """Whether the card has a graph and the forecast at least one trace."""
        return self.graph is not None and bool(self.traces)

    @property
    def means(self) -> AxisMeans:
        """Mean KER and SrcP of the forecast's traces."""
        return AxisMeans.of(self.traces)

    @property
    def ker(self) -> float | None:
        return self.means.ker

    @property
    def srcp(self) -> float | None:
        return self.means.srcp

    @property
    def mass_weighted_recall(self) -> float | None:
        return _mean(t.mass_weighted_recall for t in self.traces)[0]


@dataclass(frozen=True, slots=True)
class MethodAxes:
    """The three axes of one method."""

    method: str
    summary: MethodSummary
    means: AxisMeans
    """Over the method's cards with a graph and a trace (``means.n`` of them)."""
    n_traces: int
    mass_weighted_recall_mean: float | None
    correct: AxisMeans
    incorrect: AxisMeans


@dataclass(frozen=True, slots=True)
class Axes:
    """Every figure of the three-axis evaluation of one scoring run."""

    hindsight_dir: Path
    date_window_days: float | None
    graphs: tuple[GraphFile, ...]
    cards_without_graph: tuple[str, ...]
    graphs_not_built: tuple[tuple[str, tuple[str, ...]], ...]
    """Cards whose graph says ``graph_built: false``, with the gates it failed: left out."""
    forecasts_without_trace: tuple[tuple[str, str], ...]
    cards: tuple[CardAxes, ...]
    methods: Mapping[str, MethodAxes]


def load_graphs(
    folder: Path, card_ids: Iterable[str]
) -> tuple[dict[str, GraphFile], list[str], list[tuple[str, tuple[str, ...]]]]:
    """The hindsight graphs ``folder/<card_id>.json`` of the cards that have one.

    A graph that does not parse, has a structural error or names another card is an error
    naming its file; quality-threshold findings are kept as warnings. A graph its builder
    marked ``graph_built: false`` is left out. Returns the graphs by card id, the card ids
    without a graph, and the left-out graphs' card ids with the gates they failed.
    """
    if not folder.is_dir():
        raise ConfigError("--hindsight must be a folder of <card-id>.json graphs", file=folder)
    graphs: dict[str, GraphFile] = {}
    missing: list[str] = []
    not_built: list[tuple[str, tuple[str, ...]]] = []
    for card_id in sorted(set(card_ids)):
        path = folder / f"{card_id}.json"
        if not path.is_file():
            missing.append(card_id)
            continue
        graph = load_hindsight(path)
        if not graph.graph_built:
            not_built.append((card_id, graph.failed_gates))
            continue
        report = check_graph(graph, file=path, card_id=card_id)
        graphs[card_id] = GraphFile(
            card_id=card_id,
            path=path,
            sha256=sha256_file(path),
            graph=graph,
            warnings=report.warnings,
        )
    return graphs, missing, not_built


def _trace_axes(row: PredictionRow, graph: HindsightGraph, window: float | None) -> TraceAxes:
    # two streamed passes: the graph's records are held, the accesses only counted
    forecast = forecast_graph_of(trace_records(row.source, GRAPH_TYPES), file=row.source)
    srcp = source_precision(stream_records(row.source, ACCESS_TYPES), graph)
    ker = (
        None
        if forecast is None  # the run's condition builds no graph: KER is not defined
        else key_event_recall(graph, forecast.events, date_window_days=window)
    )
    return TraceAxes(
        source=row.source,
        run_id=row.run_id,
        ker=None if ker is None else ker.ker,
        mass_weighted_recall=None if ker is None else ker.mass_weighted_recall,
        n_key_events=0 if ker is None else len(ker.key_events),
        n_matched_key_events=0 if ker is None else len(ker.matched_key_events),
        srcp=srcp.precision,
        n_accessed=len(srcp.accessed),
        n_relevant=len(srcp.relevant),
    )


def compute_axes(
    table: MatchedTable,
    summaries: Mapping[str, MethodSummary],
    rows: Sequence[PredictionRow],
    folder: Path,
    *,
    date_window_days: float | None = DEFAULT_DATE_WINDOW_DAYS,
) -> Axes:
    """Score every trace of the matched table against its card's graph and aggregate per method.

    ``rows`` are the prediction rows read (the traces among them are scored); only forecasts in
    ``table`` (labelled and scored) take part.
    """
    graphs, missing, not_built = load_graphs(folder, table.card_ids)
    trace_rows = {row.source: row for row in rows if row.trace}

    cards: list[CardAxes] = []
    without_trace: list[tuple[str, str]] = []
    for method, by_unit in sorted(table.methods.items()):
        for unit, sf in sorted(by_unit.items()):
            graph = graphs.get(sf.forecast.card_id)
            traces: tuple[TraceAxes, ...] = ()
            used = [trace_rows[s] for s, _ in sf.forecast.sources if s in trace_rows]
            if graph is not None:
                traces = tuple(
                    _trace_axes(r, graph.graph, date_window_days)
                    for r in sorted(used, key=lambda r: r.source)
                )
                # Forecasts built from inputs (not blends or the reference) but without a trace.
                if not traces and sf.forecast.sources:
                    without_trace.append((unit, method))
            cards.append(
                CardAxes(
                    card_id=unit,
                    method=method,
                    correct=sf.score.correct,
                    graph=graph,
                    traces=traces,
                )
            )

    methods: dict[str, MethodAxes] = {}
    for method, summary in summaries.items():
        scored = [c for c in cards if c.method == method and c.scored]
        methods[method] = MethodAxes(
            method=method,
            summary=summary,
            means=AxisMeans.of(scored),
            n_traces=sum(len(c.traces) for c in scored),
            mass_weighted_recall_mean=_mean(c.mass_weighted_recall for c in scored)[0],
            correct=AxisMeans.of([c for c in scored if c.correct]),
            incorrect=AxisMeans.of([c for c in scored if not c.correct]),
        )
    cards.sort(key=lambda c: (c.card_id, c.method))
    return Axes(
        hindsight_dir=folder,
        date_window_days=date_window_days,
        graphs=tuple(graphs[c] for c in sorted(graphs)),
        cards_without_graph=tuple(missing),
        graphs_not_built=tuple(not_built),
        forecasts_without_trace=tuple(sorted(without_trace)),
        cards=tuple(cards),
        methods=methods,
    )
