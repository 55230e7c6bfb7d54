"""``worldsim score``: batch-score completed traces and prediction tables against labels."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worldsim.cli._app import app, err_console, escape, out_console
from worldsim.domain.errors import ConfigError

if TYPE_CHECKING:
    from worldsim.scoring.analysis import ScoreResult
    from worldsim.scoring.effects import Effect
    from worldsim.scoring.study_tables import StudyTables
    from worldsim.study.folder import VerifiedJob

__all__ = ["parse_tie_eps", "score_command"]


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _print_study(tables: "StudyTables", folder: Path) -> None:
    """The study's tables: per method, condition and forecast date (with KER and SrcP where
    the condition defines them, under --hindsight), and accuracy and Brier by date."""
    from rich.table import Table

    if not tables.units:
        return
    for key, title in (("method", "method"), ("condition", "condition"), ("forecast_date", "date")):
        table = Table(title=f"{folder} · per {title} (units: card × forecast date)")
        extra = ("KER", "SrcP") if tables.hindsight else ()
        for col in (title, "units", "brier", "log", "accuracy", *extra):
            table.add_column(col, justify="left" if col == title else "right")
        axes = tables.axes_by(key)
        for name, (n, brier, log, acc) in tables.by(key).items():
            cells = [str(n), f"{brier:.4f}", f"{log:.4f}", f"{acc:.3f}"]
            if tables.hindsight:
                cells += [_fmt(axes[name].ker), _fmt(axes[name].srcp)]
            table.add_row(escape(name), *cells)
        out_console.print(table)
    for what, by_method in (
        ("accuracy", tables.accuracy_by_date()),
        ("Brier", tables.brier_by_date()),
    ):
        curve = Table(title=f"{folder} · {what} by forecast date")
        curve.add_column("method")
        for date in tables.dates:
            curve.add_column(date, justify="right")
        for method, by_date in by_method.items():
            curve.add_row(escape(method), *[_fmt(by_date.get(d)) for d in tables.dates])
        out_console.print(curve)


def _effects(
    inputs: list[Path],
    effects: list[str],
    bootstrap: int | None,
    seed: int | None,
    level: float | None,
) -> list[tuple[Path, "Effect"]]:
    """Each ``--effect`` on each study folder among the inputs, over its jobs' verified
    traces (a job whose trace is refused is named and left out)."""
    if not effects:
        return []
    from worldsim.scoring.effects import paired_effect, parse_effect
    from worldsim.study.folder import open_study, usable_rows, verified_jobs

    pairs = [parse_effect(e) for e in effects]
    studies = [s for s in (open_study(p) for p in inputs if p.is_dir()) if s is not None]
    if not studies:
        raise ConfigError(
            "--effect needs a study folder (worldsim batch --out DIR)", field="--effect"
        )
    found: list[tuple[Path, Effect]] = []
    for study in studies:
        jobs = verified_jobs(study)
        _warn_unusable(jobs)
        rows = usable_rows(study, jobs)
        for control, treatment in pairs:
            found.append(
                (
                    study.path,
                    paired_effect(
                        rows,
                        control,
                        treatment,
                        n_resamples=bootstrap or 2000,
                        seed=seed or 0,
                        level=level or 0.95,
                    ),
                )
            )
    return found


def _warn_unusable(jobs: "list[VerifiedJob]") -> None:
    for job in jobs:
        if job.check in ("absent", "invalid", "anchor"):
            err_console.print(
                f"[yellow]warning:[/] {escape(job.row.trace)}: {escape(job.note)}; left out",
                highlight=False,
            )


def _print_effects(effects: list[tuple[Path, "Effect"]]) -> None:
    if not effects:
        return
    from rich.table import Table

    table = Table(title="paired effect on p_yes (treatment − control; no labels)")
    for col in ("study", "control", "treatment", "pairs", "mean Δp_yes", "interval"):
        table.add_column(
            col, justify="left" if col in ("study", "control", "treatment") else "right"
        )
    for folder, e in effects:
        table.add_row(
            escape(str(folder)),
            escape(e.control),
            escape(e.treatment),
            str(e.n_pairs),
            f"{e.mean_diff:+.4f}",
            f"[{e.low:+.4f}, {e.high:+.4f}] ({e.level:.0%})",
        )
    out_console.print(table)


def _study_tables(
    studies: list[Path], labels: Path, result: "ScoreResult"
) -> list[tuple[Path, "StudyTables"]]:
    """Each study folder's tables from the forecasts scored (its jobs' verified traces), with
    their KER and SrcP when --hindsight was given."""
    if not studies:
        return []
    from worldsim.scoring.labels import load_labels
    from worldsim.scoring.study_tables import study_tables
    from worldsim.study.folder import open_study, scored_rows

    label_set = load_labels(labels)
    by_trace = None
    if result.axes is not None:
        by_trace = {Path(t.source).resolve(): t for card in result.axes.cards for t in card.traces}
    tables = []
    for folder in studies:
        study = open_study(folder)
        assert study is not None  # a study folder among the inputs
        rows = scored_rows(study, result.loaded.rows)
        tables.append((folder, study_tables(rows, label_set, by_trace)))
    return tables


def _forecastbench(question_set: Path, inputs: list[Path], labels: Path, out: Path | None) -> None:
    """``score --forecastbench SET``: the round's leaderboard scores (scoring.forecastbench)."""
    from worldsim.domain.files import write_files
    from worldsim.scoring.forecastbench import print_round, score_round
    from worldsim.scoring.inputs import load_predictions
    from worldsim.scoring.labels import load_labels
    from worldsim.study.folder import expand_study_inputs

    expanded, _, heads = expand_study_inputs(inputs)
    loaded = load_predictions(expanded, heads=heads)
    for warning in loaded.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    scores = score_round(question_set, load_labels(labels), loaded.rows)
    if out is not None:
        doc = {"forecastbench": scores.to_json()}
        write_files({out: (json.dumps(doc, indent=2, allow_nan=False) + "\n").encode()})
    print_round(scores, out_console)


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
            metavar="INPUT",
            help="Trace files or folders, prediction tables (CSV/JSONL), or a study folder "
            "(worldsim batch --out DIR).",
        ),
    ],
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            metavar="PATH",
            help="Labels: CSV, JSONL, YAML/JSON or a folder (required unless only --effect).",
        ),
    ] = None,
    effect: Annotated[
        list[str] | None,
        typer.Option(
            "--effect",
            metavar="CONTROL:TREATMENT",
            help="On a study folder: the treatment method's p_yes minus the control's, paired "
            "by card, date and seed, with a bootstrap interval; needs no labels (repeatable).",
        ),
    ] = None,
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
    recalibrate: Annotated[
        list[str] | None,
        typer.Option(
            "--recalibrate",
            metavar="METHOD",
            help="Add METHOD+platt: METHOD's binary forecasts after a Platt recalibration "
            "fitted on the other cards (5-fold, by card); exploratory unless the prereg lists it "
            "under recalibrate: (repeatable).",
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
    split_card_versions: Annotated[
        bool,
        typer.Option(
            "--split-card-versions",
            help="Score a card id forecast at several as-of dates (or from several card "
            "contents) as separate units, card@date or card#hash, instead of failing.",
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
    attribution: Annotated[
        bool,
        typer.Option(
            "--attribution",
            help="What moved each trace's forecast, largest first: each fork's contribution "
            "(p_yes minus p_yes with its subtree folded back into its parent) and, for a "
            "continued run, each piece of news's; needs no labels (docs/concepts.md).",
        ),
    ] = False,
    forecastbench: Annotated[
        Path | None,
        typer.Option(
            "--forecastbench",
            metavar="SET",
            help="Score as ForecastBench's leaderboard scores the round of question set SET: "
            "dataset, market and overall (their mean) Brier, missing forecasts imputed 0.5, "
            "open markets against their value, beside ForecastBench's baselines; accuracy "
            "counts p = 0.5 as neither right nor wrong.",
        ),
    ] = None,
) -> None:
    """Score forecasts against labels: proper scores, paired comparisons, calibration.

    Every trace is checked as `worldsim verify` checks it: one it refuses stops the command
    with its line (exit 1); one cut off, or a failed run, is skipped with a warning. A study
    folder is scored from the traces of its completed jobs, each required to have the head its
    job log recorded, and its tables per method, condition and forecast date follow, with
    accuracy by date. Rows read from prediction tables are marked "unverified"."""
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
    from worldsim.scoring.study_tables import accuracy_by_date_plot
    from worldsim.scoring.table import Blend

    if attribution:
        from worldsim.cli.attribution import print_attribution

        print_attribution(inputs, json_path)
        return
    effects = _effects(inputs, effect or [], bootstrap, seed, level)
    if labels is None:
        if not effects:
            raise ConfigError(
                "give --labels PATH (or --effect CONTROL:TREATMENT on a study folder, which "
                "needs none)",
                field="--labels",
            )
        if json_path is not None:
            only = {"effects": [{"study": str(f), **e.to_json()} for f, e in effects]}
            write_files({json_path: (json.dumps(only, indent=2) + "\n").encode()})
        _print_effects(effects)
        return
    if forecastbench is not None:
        _forecastbench(forecastbench, inputs, labels, json_path)
        return
    if plots is not None:
        require_matplotlib()
    window: float | None = DEFAULT_DATE_WINDOW_DAYS
    if date_window is not None:
        if hindsight is None:
            raise ConfigError("--date-window applies only with --hindsight", field="--date-window")
        window = parse_date_window(date_window)
    from worldsim.study.folder import expand_study_inputs

    inputs, studies, heads = expand_study_inputs(inputs)
    options = ScoreOptions(
        inputs=tuple(inputs),
        labels=labels,
        compare=tuple(parse_pair(c) for c in compare or ()),
        tie_eps=parse_tie_eps(tie_eps) if tie_eps is not None else None,
        n_resamples=bootstrap,
        seed=seed,
        level=level,
        blends=tuple(Blend.parse(b) for b in blend or ()),
        recalibrate=tuple(dict.fromkeys(recalibrate or ())),
        uniform=uniform,
        cutoffs=cutoffs,
        cards=cards,
        prereg_lock=prereg,
        allow_unlabelled=allow_unlabelled,
        n_bins=bins,
        hindsight=hindsight,
        date_window_days=window,
        split_versions=split_card_versions or bool(studies),  # a study sweeps dates
        heads=heads,
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
    if effects:
        doc["effects"] = [{"study": str(f), **e.to_json()} for f, e in effects]
    studied = _study_tables(studies, labels, result)
    if studied:
        doc["studies"] = {str(folder): tables.to_json() for folder, tables in studied}
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
        for i, (_, tables) in enumerate(studied):
            for name, content in accuracy_by_date_plot(tables).items():
                files[plots / (name if len(studied) == 1 else f"study{i + 1}_{name}")] = content
    write_files(files)
    print_summary(result, doc, out_console)
    for folder, tables in studied:
        _print_study(tables, folder)
    _print_effects(effects)
