"""``worldsim score``: batch-score completed traces and prediction tables against labels."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
from pathlib import Path
from typing import Annotated

import typer

from worldsim.cli._app import app, err_console, escape, out_console
from worldsim.domain.errors import ConfigError

__all__ = ["parse_tie_eps", "score_command"]


def parse_tie_eps(text: str) -> tuple[float, ...]:
    """Read ``0,0.0001,0.001`` into thresholds."""
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(
            f"tie thresholds {text!r} are not comma-separated numbers", field="--tie-eps"
        ) from None
    if not values:
        raise ConfigError("give at least one tie threshold", field="--tie-eps")
    return values


@app.command("score")
def score_command(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="INPUT", help="Trace files or folders, or prediction tables (CSV/JSONL)."
        ),
    ],
    labels: Annotated[
        Path,
        typer.Option("--labels", metavar="PATH", help="Labels: CSV, JSONL, YAML/JSON or a folder."),
    ],
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare", metavar="BASELINE:METHOD", help="A paired comparison (repeatable)."
        ),
    ] = None,
    tie_eps: Annotated[
        str | None,
        typer.Option(
            "--tie-eps",
            metavar="EPS,EPS,...",
            help="Practical-tie thresholds (default 0,0.0001,0.001).",
        ),
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option("--bootstrap", metavar="N", help="Bootstrap resamples (default 10000)."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", metavar="N", help="Bootstrap seed (default 0).")
    ] = None,
    level: Annotated[
        float | None, typer.Option("--level", metavar="P", help="Interval level (default 0.95).")
    ] = None,
    blend: Annotated[
        list[str] | None,
        typer.Option(
            "--blend",
            metavar="NAME=METHOD:W,METHOD:W",
            help="A blend of methods, weights summing to 1 (repeatable).",
        ),
    ] = None,
    uniform: Annotated[
        bool, typer.Option("--uniform", help="Add the always-0.5 method 'uniform'.")
    ] = False,
    cutoffs: Annotated[
        Path | None,
        typer.Option("--cutoffs", metavar="FILE", help="Model → knowledge cutoff (YAML/JSON/CSV)."),
    ] = None,
    cards: Annotated[
        Path | None,
        typer.Option(
            "--cards", metavar="DIR", help="Folder of cards, for as-of dates of table rows."
        ),
    ] = None,
    prereg: Annotated[
        Path | None,
        typer.Option("--prereg", metavar="LOCK", help="A prereg lock to verify and follow."),
    ] = None,
    allow_unlabelled: Annotated[
        bool,
        typer.Option(
            "--allow-unlabelled", help="Report predicted cards without a label instead of failing."
        ),
    ] = False,
    bins: Annotated[int, typer.Option("--bins", metavar="N", help="Calibration bins.", min=1)] = 10,
    hindsight: Annotated[
        Path | None,
        typer.Option(
            "--hindsight",
            metavar="DIR",
            help="Folder of hindsight graphs <card-id>.json: adds the three axes (KER, SrcP).",
        ),
    ] = None,
    date_window: Annotated[
        str | None,
        typer.Option(
            "--date-window",
            metavar="DAYS|none",
            help="KER: days between matched dates, or 'none' (default 7; needs --hindsight).",
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", metavar="FILE", help="Write the JSON report.")
    ] = None,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", metavar="FILE", help="Write the per-card table as CSV.")
    ] = None,
    markdown_path: Annotated[
        Path | None,
        typer.Option("--markdown", metavar="FILE", help="Write the per-card table as Markdown."),
    ] = None,
    plots: Annotated[
        Path | None,
        typer.Option("--plots", metavar="DIR", help="Folder for figures and their CSVs."),
    ] = None,
) -> None:
    """Score forecasts against labels: proper scores, paired comparisons, calibration."""
    from worldsim.domain.files import write_files
    from worldsim.scoring.analysis import ScoreOptions, score
    from worldsim.scoring.hindsight import DEFAULT_DATE_WINDOW_DAYS
    from worldsim.scoring.hindsight.ker import parse_date_window
    from worldsim.scoring.paired import parse_pair
    from worldsim.scoring.per_card import (
        per_card_columns,
        per_card_csv,
        per_card_markdown,
        per_card_rows,
    )
    from worldsim.scoring.plots import render_plots, require_matplotlib
    from worldsim.scoring.report import print_summary, to_json
    from worldsim.scoring.table import Blend

    if plots is not None:
        require_matplotlib()
    window: float | None = DEFAULT_DATE_WINDOW_DAYS
    if date_window is not None:
        if hindsight is None:
            raise ConfigError("--date-window applies only with --hindsight", field="--date-window")
        window = parse_date_window(date_window)
    options = ScoreOptions(
        inputs=tuple(inputs),
        labels=labels,
        compare=tuple(parse_pair(c) for c in compare or ()),
        tie_eps=parse_tie_eps(tie_eps) if tie_eps is not None else None,
        n_resamples=bootstrap,
        seed=seed,
        level=level,
        blends=tuple(Blend.parse(b) for b in blend or ()),
        uniform=uniform,
        cutoffs=cutoffs,
        cards=cards,
        prereg_lock=prereg,
        allow_unlabelled=allow_unlabelled,
        n_bins=bins,
        hindsight=hindsight,
        date_window_days=window,
    )
    result = score(options)
    for warning in result.loaded.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if result.axes is not None:
        for graph in result.axes.graphs:
            for warning in graph.warnings:
                err_console.print(
                    f"[yellow]warning:[/] {escape(str(graph.path))}: {escape(warning)}",
                    highlight=False,
                )
    doc = to_json(result)
    files: dict[Path, bytes] = {}
    if json_path is not None:
        files[json_path] = (json.dumps(doc, indent=2, allow_nan=False) + "\n").encode()
    rows = per_card_rows(result)
    columns = per_card_columns(result)
    if csv_path is not None:
        files[csv_path] = per_card_csv(rows, columns).encode()
    if markdown_path is not None:
        files[markdown_path] = per_card_markdown(rows, columns).encode()
    if plots is not None:
        for name, content in render_plots(result.analysis).items():
            files[plots / name] = content
    write_files(files)
    print_summary(result, doc, out_console)
