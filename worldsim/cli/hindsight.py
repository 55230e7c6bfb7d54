"""``worldsim hindsight``: validate hindsight graphs and score runs against them.

One convention for every subcommand: what is analysed (a trace, a forecast, or for
``validate`` the graph itself) is a positional path; the hindsight graph it is scored against
is ``--hindsight FILE``; what is written goes to ``-o``.
"""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from worldsim.cli._app import JsonOption, command_group, err_console, escape, fail, out_console
from worldsim.domain.errors import WorldsimError
from worldsim.scoring.hindsight import DEFAULT_DATE_WINDOW_DAYS

if TYPE_CHECKING:
    from worldsim.scoring.hindsight.graph import HindsightGraph, ValidationReport

__all__ = ["hindsight_app", "note_if_not_built"]

HindsightGraphOption = Annotated[
    Path,
    typer.Option(
        "--hindsight",
        metavar="FILE",
        help="Hindsight graph JSON; one naming another card than the run's is refused.",
    ),
]

hindsight_app = command_group(
    "hindsight",
    "Hindsight evaluation: causal graphs, key-event recall, source precision, pressure.",
)


def _load_checked(path: Path) -> "tuple[HindsightGraph, ValidationReport]":
    """Load a graph and refuse it on structural errors, with its quality findings."""
    from worldsim.scoring.hindsight.graph import check_graph, load_hindsight

    graph = load_hindsight(path)
    return graph, check_graph(graph, file=path)


def _load_scored(path: Path) -> "HindsightGraph":
    """A graph to score a run against: refused as `_load_checked` refuses it, and when it says
    ``graph_built: false`` (``score --hindsight`` leaves such a graph out)."""
    from worldsim.scoring.hindsight.graph import check_graph_built

    graph, _ = _load_checked(path)
    check_graph_built(graph, file=path)
    return graph


def note_if_not_built(graph: "HindsightGraph", path: Path) -> None:
    """A chart of a graph its build left ``graph_built: false`` says so on standard error:
    scoring leaves such a graph out."""
    from worldsim.scoring.hindsight.graph import not_built

    if (reason := not_built(graph)) is not None:
        err_console.print(
            f"note: {escape(str(path))}: {escape(reason)}; charted all the same", highlight=False
        )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


@hindsight_app.command("validate")
def validate(
    graph_path: Annotated[Path, typer.Argument(help="Hindsight graph JSON.", metavar="HINDSIGHT")],
    strict: Annotated[bool, typer.Option("--strict", help="Thresholds fail too.")] = False,
    min_events: Annotated[int, typer.Option(help="Fewest events besides the outcome.")] = 10,
    min_edges: Annotated[int, typer.Option(help="Fewest edges.")] = 1,
    min_depth: Annotated[
        int, typer.Option(help="Fewest hops on the longest causal path to the outcome.")
    ] = 3,
    min_edge_confidence: Annotated[float, typer.Option(help="Lowest edge confidence.")] = 0.6,
    min_edge_strength: Annotated[float, typer.Option(help="Lowest edge strength.")] = 0.3,
    max_neutral_magnitude: Annotated[
        float, typer.Option(help="Largest magnitude of a neutral impact.")
    ] = 0.3,
    as_json: JsonOption = False,
) -> None:
    """Check a hindsight graph: structure always, quality thresholds as warnings or errors.

    Events and depth are counted as the quality gates of `worldsim build hindsight` count them:
    events besides the outcome, depth in hops on the longest causal path to the outcome. A graph
    that says graph_built: false is reported so too.
    """
    from worldsim.scoring.hindsight.graph import Thresholds, load_hindsight, validate_graph

    thresholds = Thresholds(
        min_events=min_events,
        min_edges=min_edges,
        min_depth=min_depth,
        min_edge_confidence=min_edge_confidence,
        min_edge_strength=min_edge_strength,
        max_neutral_magnitude=max_neutral_magnitude,
    )
    try:
        graph = load_hindsight(graph_path)
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
    report = validate_graph(graph, thresholds, strict=strict)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "errors": list(report.errors),
                    "warnings": list(report.warnings),
                    "depth": report.depth,
                    "events": report.events,
                    "edges": len(graph.edges),
                }
            )
        )
    else:
        for warning in report.warnings:
            err_console.print(
                f"warning: {escape(str(graph_path))}: {escape(warning)}", highlight=False
            )
        for error in report.errors:
            err_console.print(f"error: {escape(str(graph_path))}: {escape(error)}", highlight=False)
        if report.ok:
            out_console.print(
                f"{escape(str(graph_path))}: ok ({report.events} events besides the outcome, "
                f"{len(graph.edges)} edges, depth {report.depth} hop(s), "
                f"{len(report.warnings)} warning(s))",
                highlight=False,
            )
    if not report.ok:
        raise typer.Exit(2)


@hindsight_app.command("forecast-graph")
def forecast_graph(
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help="Run trace (JSONL).")],
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="FILE", help="Forecast graph JSON to write.")
    ],
) -> None:
    """Extract the simulated events of every timeline, and their causal links, from a trace."""
    from worldsim.domain.files import write_files
    from worldsim.scoring.hindsight.forecast import (
        FORECAST_TYPES,
        extract_forecast,
        trace_records,
    )

    try:
        graph = extract_forecast(trace_records(trace, FORECAST_TYPES))
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
    write_files({output: (graph.model_dump_json(indent=2) + "\n").encode()})
    timelines = len({e.timeline for e in graph.events})
    out_console.print(
        f"wrote {escape(str(output))}: {len(graph.events)} event(s) in {timelines} "
        f"timeline(s), {len(graph.links)} link(s)",
        highlight=False,
    )


@hindsight_app.command("ker")
def ker(
    forecast: Annotated[
        Path,
        typer.Argument(
            metavar="FORECAST", help="Run trace (.jsonl), forecast graph or events JSON."
        ),
    ],
    hindsight: HindsightGraphOption,
    date_window: Annotated[
        str,
        typer.Option(
            "--date-window", metavar="DAYS|none", help="Days between matched dates, or 'none'."
        ),
    ] = str(int(DEFAULT_DATE_WINDOW_DAYS)),
    as_json: JsonOption = False,
) -> None:
    """Key-event recall of simulated events against a hindsight graph. A graph that says
    graph_built: false is refused: `score --hindsight` leaves it out."""
    from worldsim.scoring.hindsight.forecast import load_forecast
    from worldsim.scoring.hindsight.graph import check_graph_card
    from worldsim.scoring.hindsight.ker import key_event_recall, parse_date_window

    try:
        window = parse_date_window(date_window)
        graph = _load_scored(hindsight)
        simulated = load_forecast(forecast)
        check_graph_card(graph, simulated.card_id, file=hindsight)
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
    report = key_event_recall(graph, simulated.events, date_window_days=window)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    out_console.print(
        f"KER {_fmt(report.ker)} ({len(report.matched_key_events)}/{len(report.key_events)} "
        f"key events)  mass-weighted {_fmt(report.mass_weighted_recall)}  "
        f"event P/R/F1 {_fmt(report.event_precision)}/{_fmt(report.event_recall)}/"
        f"{_fmt(report.event_f1)}",
        highlight=False,
    )
    for match in report.matches:
        out_console.print(
            f"  {escape(match.hindsight)} ↔ {escape(match.forecast)}  {match.score:.3f}",
            highlight=False,
        )


@hindsight_app.command("sources")
def sources(
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help="Run trace (JSONL).")],
    hindsight: HindsightGraphOption,
    as_json: JsonOption = False,
) -> None:
    """Source precision of the documents the run's agents retrieved or cited. A graph that says
    graph_built: false is refused: `score --hindsight` leaves it out."""
    from worldsim.scoring.hindsight.evidence import trace_source_precision

    try:
        graph = _load_scored(hindsight)
        result = trace_source_precision(trace, graph, graph_file=hindsight)
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    out_console.print(
        f"source precision {_fmt(result.precision)} ({len(result.relevant)} of "
        f"{len(result.accessed)} accessed document(s) are hindsight sources)",
        highlight=False,
    )


@hindsight_app.command("pressure")
def pressure(
    hindsight: HindsightGraphOption,
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="DIR", help="Folder for chart and CSV.")
    ],
    trace: Annotated[
        Path | None,
        typer.Argument(metavar="TRACE", help="Run trace (JSONL) whose probability is overlaid."),
    ] = None,
    market: Annotated[
        Path | None,
        typer.Option("--market", metavar="CSV", help="CSV 'date,price', prices in [0, 1]."),
    ] = None,
    image_format: Annotated[
        Literal["png", "svg"], typer.Option("--format", help="Image format.")
    ] = "png",
) -> None:
    """Chart cumulative causal pressure, market price and the simulated probability. A graph
    that says graph_built: false is charted with a note on standard error."""
    from worldsim.scoring.hindsight.forecast import card_id_of, trace_records
    from worldsim.scoring.hindsight.graph import check_graph_card
    from worldsim.scoring.hindsight.pressure import (
        PRESSURE_TYPES,
        read_market,
        require_matplotlib,
        write_pressure,
    )

    try:
        require_matplotlib()
        graph, _ = _load_checked(hindsight)
        note_if_not_built(graph, hindsight)
        records = None
        if trace is not None:
            records = trace_records(trace, PRESSURE_TYPES | {"run_started"})
            check_graph_card(graph, card_id_of(records), file=hindsight)
        prices = read_market(market) if market is not None else None
        written = write_pressure(
            output, graph, records=records, market=prices, image_format=image_format
        )
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
    for path in written:
        out_console.print(f"wrote {escape(str(path))}", highlight=False)
