"""``worldsim score``: batch-score completed traces and prediction tables against labels."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worldsim.cli._app import app, err_console, escape, out_console
from worldsim.cli.score_studies import (
    print_effects,
    print_effects_only,
    print_study,
    study_effects,
    study_tables_scored,
)
from worldsim.domain.errors import ConfigError

if TYPE_CHECKING:
    from worldsim.scoring.analysis import ScoreResult
    from worldsim.scoring.effects import Effect
    from worldsim.scoring.study_tables import StudyTables

__all__ = ["parse_tie_eps", "score_command"]


def _forecastbench(question_set: Path, inputs: list[Path], labels: Path, out: Path | None) -> None:
    """``score --forecastbench SET``: the round's leaderboard scores (scoring.forecastbench)."""
    from worldsim.domain.files import write_files
    from worldsim.scoring.forecastbench import print_round, score_round
    from worldsim.scoring.inputs import load_predictions
    from worldsim.scoring.labels import load_labels
    from worldsim.study.folder import expand_study_inputs, unfinished_notes

    expanded, studies, heads = expand_study_inputs(inputs)
    loaded = load_predictions(expanded, heads=heads)
    for warning in (*unfinished_notes(studies), *loaded.warnings):
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


InputsArgument = Annotated[
    list[Path],
    typer.Argument(
        metavar="INPUT",
        help="Trace files or folders, prediction tables (CSV/JSONL), or a study folder "
        "(worldsim batch --out DIR).",
    ),
]
LabelsOption = Annotated[
    Path | None,
    typer.Option(
        "--labels",
        metavar="PATH",
        help="Labels: CSV, JSONL, YAML/JSON or a folder (required unless only --effect).",
    ),
]
EffectOption = Annotated[
    list[str] | None,
    typer.Option(
        "--effect",
        metavar="CONTROL:TREATMENT",
        help="On a study folder: the treatment method's p_yes minus the control's, paired "
        "by card, date and seed, with a bootstrap interval; needs no labels (repeatable).",
    ),
]
CompareOption = Annotated[
    list[str] | None,
    typer.Option("--compare", metavar="BASELINE:METHOD", help="A paired comparison (repeatable)."),
]
TieEpsOption = Annotated[
    str | None,
    typer.Option(
        "--tie-eps",
        metavar="EPS,EPS,...",
        help="Practical-tie thresholds (default 0,0.0001,0.001).",
    ),
]
BootstrapOption = Annotated[
    int | None,
    typer.Option("--bootstrap", metavar="N", min=1, help="Bootstrap resamples (default 10000)."),
]
SeedOption = Annotated[
    int | None,
    typer.Option("--seed", metavar="N", min=0, help="Bootstrap seed (default 0)."),
]
LevelOption = Annotated[
    float | None, typer.Option("--level", metavar="P", help="Interval level (default 0.95).")
]
BlendOption = Annotated[
    list[str] | None,
    typer.Option(
        "--blend",
        metavar="NAME=METHOD:W,METHOD:W",
        help="A blend of methods, weights summing to 1 (repeatable).",
    ),
]
RecalibrateOption = Annotated[
    list[str] | None,
    typer.Option(
        "--recalibrate",
        metavar="METHOD",
        help="Add METHOD+platt: METHOD's binary forecasts after a Platt recalibration "
        "fitted on the other cards (5-fold, by card); exploratory unless the prereg lists it "
        "under recalibrate: (repeatable).",
    ),
]
UniformOption = Annotated[
    bool, typer.Option("--uniform", help="Add the always-0.5 method 'uniform'.")
]
CutoffsOption = Annotated[
    Path | None,
    typer.Option("--cutoffs", metavar="FILE", help="Model → knowledge cutoff (YAML/JSON/CSV)."),
]
CardsOption = Annotated[
    Path | None,
    typer.Option("--cards", metavar="DIR", help="Folder of cards, for as-of dates of table rows."),
]
PreregOption = Annotated[
    Path | None,
    typer.Option("--prereg", metavar="LOCK", help="A prereg lock to verify and follow."),
]
AllowUnlabelledOption = Annotated[
    bool,
    typer.Option(
        "--allow-unlabelled", help="Report predicted cards without a label instead of failing."
    ),
]
SplitVersionsOption = Annotated[
    bool,
    typer.Option(
        "--split-card-versions",
        help="Score a card id forecast at several as-of dates (or from several card "
        "contents) as separate units, card@date or card#hash, instead of failing.",
    ),
]
BinsOption = Annotated[int, typer.Option("--bins", metavar="N", help="Calibration bins.", min=1)]
HindsightOption = Annotated[
    Path | None,
    typer.Option(
        "--hindsight",
        metavar="DIR",
        help="Folder of hindsight graphs <card-id>.json: adds the three axes (KER, SrcP).",
    ),
]
DateWindowOption = Annotated[
    str | None,
    typer.Option(
        "--date-window",
        metavar="DAYS|none",
        help="KER: days between matched dates, or 'none' (default 7; needs --hindsight).",
    ),
]
JsonOption = Annotated[
    Path | None, typer.Option("--json", metavar="FILE", help="Write the JSON report.")
]
CsvOption = Annotated[
    Path | None, typer.Option("--csv", metavar="FILE", help="Write the per-card table as CSV.")
]
MarkdownOption = Annotated[
    Path | None,
    typer.Option("--markdown", metavar="FILE", help="Write the per-card table as Markdown."),
]
PlotsOption = Annotated[
    Path | None,
    typer.Option("--plots", metavar="DIR", help="Folder for figures and their CSVs."),
]
AttributionOption = Annotated[
    bool,
    typer.Option(
        "--attribution",
        help="What moved each trace's forecast, largest first: each fork's contribution "
        "(p_yes minus p_yes with its subtree folded back into its parent) and, for a "
        "continued run, each piece of news's; needs no labels (docs/concepts.md).",
    ),
]
ForecastBenchOption = Annotated[
    Path | None,
    typer.Option(
        "--forecastbench",
        metavar="SET",
        help="Score as ForecastBench's leaderboard scores the round of question set SET: "
        "dataset, market and overall (their mean) Brier, missing forecasts imputed 0.5, "
        "open markets against their value, beside ForecastBench's baselines; accuracy "
        "counts p = 0.5 as neither right nor wrong.",
    ),
]


@app.command("score")
def score_command(
    inputs: InputsArgument,
    labels: LabelsOption = None,
    effect: EffectOption = None,
    compare: CompareOption = None,
    tie_eps: TieEpsOption = None,
    bootstrap: BootstrapOption = None,
    seed: SeedOption = None,
    level: LevelOption = None,
    blend: BlendOption = None,
    recalibrate: RecalibrateOption = None,
    uniform: UniformOption = False,
    cutoffs: CutoffsOption = None,
    cards: CardsOption = None,
    prereg: PreregOption = None,
    allow_unlabelled: AllowUnlabelledOption = False,
    split_card_versions: SplitVersionsOption = False,
    bins: BinsOption = 10,
    hindsight: HindsightOption = None,
    date_window: DateWindowOption = None,
    json_path: JsonOption = None,
    csv_path: CsvOption = None,
    markdown_path: MarkdownOption = None,
    plots: PlotsOption = None,
    attribution: AttributionOption = False,
    forecastbench: ForecastBenchOption = None,
) -> None:
    """Score forecasts against labels: proper scores, paired comparisons, calibration.

    Every trace is checked as `worldsim verify` checks it: one it refuses stops the command
    with its line (exit 1); one cut off, or a failed run, is skipped with a warning, and when
    nothing else is left the command exits 3, as `verify` does for such a trace. A study
    folder is scored from the traces of its completed jobs, each required to have the head its
    job log recorded, and its tables per method, condition and forecast date follow, with
    accuracy by date. Rows read from prediction tables are marked "unverified"."""
    from worldsim.scoring.analysis import ScoreOptions, score
    from worldsim.scoring.paired import parse_pair
    from worldsim.scoring.table import Blend
    from worldsim.study.folder import expand_study_inputs, unfinished_notes

    _one_file_each({"--json": json_path, "--csv": csv_path, "--markdown": markdown_path})
    if attribution:
        from worldsim.cli.attribution import print_attribution

        print_attribution(inputs, json_path)
        return
    effects = study_effects(inputs, effect or [], bootstrap, seed, level)
    if labels is None:
        print_effects_only(effects, json_path)
        return
    if forecastbench is not None:
        _forecastbench(forecastbench, inputs, labels, json_path)
        return
    if plots is not None:
        from worldsim.scoring.plots import require_matplotlib

        require_matplotlib()
    window = _date_window(date_window, hindsight)
    inputs, studies, heads = expand_study_inputs(inputs)
    unfinished = unfinished_notes(studies)
    result = score(
        ScoreOptions(
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
    )
    _warn_result(result, unfinished)
    studied = study_tables_scored(studies, labels, result)
    doc = _document(result, effects, studied)
    _write_reports(result, doc, studied, json_path, csv_path, markdown_path, plots)
    _print_all(result, doc, studied, effects)


def _date_window(date_window: str | None, hindsight: Path | None) -> float | None:
    """KER's window in days (``None``: no window), from ``--date-window``."""
    from worldsim.scoring.hindsight import DEFAULT_DATE_WINDOW_DAYS
    from worldsim.scoring.hindsight.ker import parse_date_window

    if date_window is None:
        return DEFAULT_DATE_WINDOW_DAYS
    if hindsight is None:
        raise ConfigError("--date-window applies only with --hindsight", field="--date-window")
    return parse_date_window(date_window)


def _warn_result(result: "ScoreResult", unfinished: list[str]) -> None:
    """The warnings of the studies with unfinished jobs, of the rows read and of the hindsight
    graphs, one line each on stderr."""
    warnings = [*unfinished, *result.loaded.warnings]
    if result.axes is not None:
        warnings += [f"{g.path}: {w}" for g in result.axes.graphs for w in g.warnings]
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)


def _document(
    result: "ScoreResult",
    effects: "list[tuple[Path, Effect]]",
    studied: "list[tuple[Path, StudyTables]]",
) -> dict[str, Any]:
    """The JSON report: the scores, then the effects and the studies' tables where there are."""
    from worldsim.scoring.report import to_json

    doc = to_json(result)
    if effects:
        doc["effects"] = [{"study": str(f), **e.to_json()} for f, e in effects]
    if studied:
        doc["studies"] = {str(folder): tables.to_json() for folder, tables in studied}
    return doc


def _one_file_each(targets: dict[str, Path | None]) -> None:
    """Refuse two report options naming one file: the later report would replace the other."""
    seen: dict[Path, str] = {}
    for flag, path in targets.items():
        if path is None:
            continue
        where = path.resolve()
        if where in seen:
            raise ConfigError(f"{seen[where]} and {flag} name the same file", file=path)
        seen[where] = flag


def _write_reports(
    result: "ScoreResult",
    doc: dict[str, Any],
    studied: "list[tuple[Path, StudyTables]]",
    json_path: Path | None,
    csv_path: Path | None,
    markdown_path: Path | None,
    plots: Path | None,
) -> None:
    """Every file asked for, written together (all or none)."""
    from worldsim.domain.files import write_files
    from worldsim.scoring.per_card import (
        per_card_columns,
        per_card_csv,
        per_card_markdown,
        per_card_rows,
    )
    from worldsim.scoring.plots import render_plots
    from worldsim.scoring.study_tables import accuracy_by_date_plot

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


def _print_all(
    result: "ScoreResult",
    doc: dict[str, Any],
    studied: "list[tuple[Path, StudyTables]]",
    effects: "list[tuple[Path, Effect]]",
) -> None:
    from worldsim.scoring.report import print_summary

    print_summary(result, doc, out_console)
    for folder, tables in studied:
        print_study(tables, folder)
    print_effects(effects)
