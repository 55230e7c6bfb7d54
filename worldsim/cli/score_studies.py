"""What ``worldsim score`` says of study folders: their tables, and paired effects between
methods (which need no labels)."""

# No `from __future__ import annotations` here, as in every command module: names imported only
# for type checking are quoted.

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldsim.cli._app import escape, out_console
from worldsim.domain.errors import ConfigError, TraceError

if TYPE_CHECKING:
    from worldsim.scoring.analysis import ScoreResult
    from worldsim.scoring.effects import Effect
    from worldsim.scoring.study_tables import StudyTables
    from worldsim.study.folder import JobCheck

__all__ = [
    "print_effects",
    "print_effects_only",
    "print_study",
    "study_effects",
    "study_tables_scored",
]


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def print_study(tables: "StudyTables", folder: Path) -> None:
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


def study_effects(
    inputs: list[Path],
    effects: list[str],
    bootstrap: int | None,
    seed: int | None,
    level: float | None,
) -> list[tuple[Path, "Effect"]]:
    """Each ``--effect`` on each study folder among the inputs, over its jobs' verified
    traces (a job whose trace is missing or refused stops it, naming the trace)."""
    if not effects:
        return []
    from worldsim.scoring.effects import paired_effect, parse_effect
    from worldsim.scoring.paired import DEFAULT_RESAMPLES
    from worldsim.study.folder import check_jobs, open_study, read_verified, usable_rows

    pairs = [parse_effect(e) for e in effects]
    studies = [s for s in (open_study(p) for p in inputs if p.is_dir()) if s is not None]
    if not studies:
        raise ConfigError(
            "--effect needs a study folder (worldsim batch --out DIR)", field="--effect"
        )
    found: list[tuple[Path, Effect]] = []
    for study in studies:
        jobs = list(check_jobs(study, read_verified))
        _refuse_flagged(study.path, jobs)
        rows = usable_rows(study, jobs)
        for control, treatment in pairs:
            found.append(
                (
                    study.path,
                    paired_effect(
                        rows,
                        control,
                        treatment,
                        n_resamples=DEFAULT_RESAMPLES if bootstrap is None else bootstrap,
                        seed=0 if seed is None else seed,
                        level=0.95 if level is None else level,
                    ),
                )
            )
    return found


def _refuse_flagged(study: Path, jobs: "list[JobCheck[Any]]") -> None:
    """A job whose trace is missing, replaced or refused stops the effect, as it stops a
    scored study: its trace would be left out of one side of the pairs."""
    for job in jobs:
        if job.flagged:
            where = study / job.row.trace
            if job.state == "absent":
                raise ConfigError("trace not found", file=where)
            raise TraceError(job.note, file=where)


def print_effects(effects: list[tuple[Path, "Effect"]]) -> None:
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


def study_tables_scored(
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


def print_effects_only(effects: "list[tuple[Path, Effect]]", json_path: Path | None) -> None:
    """``score --effect`` without labels: the effects alone, printed and as JSON."""
    from worldsim.domain.files import write_files

    if not effects:
        raise ConfigError(
            "give --labels PATH (or --effect CONTROL:TREATMENT on a study folder, which "
            "needs none)",
            field="--labels",
        )
    if json_path is not None:
        only = {"effects": [{"study": str(f), **e.to_json()} for f, e in effects]}
        write_files({json_path: (json.dumps(only, indent=2) + "\n").encode()})
    print_effects(effects)
