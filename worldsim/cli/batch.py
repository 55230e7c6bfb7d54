"""``worldsim batch``: run a whole study from its manifest, resumably."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worldsim.cli._app import app, err_console, escape, on_interrupt, out_console
from worldsim.cli.models import preflight_routes
from worldsim.cli.settings import CacheDirOption, PreflightOption

if TYPE_CHECKING:
    from rich.live import Live

    from worldsim.models.limits import LimitChange
    from worldsim.study.jobs import Job
    from worldsim.study.manifest import Study
    from worldsim.study.outputs import PredictionRow
    from worldsim.study.runner import Action, StudyObserver, StudyResult

__all__ = ["batch"]


def _forecast(row: "PredictionRow") -> str:
    if row.p_yes is not None:
        return f"p_yes {row.p_yes:.4f}"
    if row.p_options is not None:
        return " ".join(f"{k} {v:.3f}" for k, v in sorted(row.p_options.items()))
    return row.error or row.status


class _Lines:
    """One plain line per finished job on standard error."""

    def job_started(self, job: "Job", action: "Action") -> None:
        return None

    def job_finished(self, row: "PredictionRow", done: int, total: int) -> None:
        where = f"{row.card_id} · {row.method} · {row.forecast_date} · s{row.seed}"
        wall = f" · {row.wall_s:.2f} s" if row.wall_s is not None else ""
        err_console.print(
            f"[{done}/{total}] {row.status:<8} {escape(where)} · {escape(_forecast(row))}{wall}",
            highlight=False,
            soft_wrap=True,
        )

    def limit_changed(self, change: "LimitChange") -> None:
        after = f" (Retry-After {change.retry_after_s:g} s)" if change.retry_after_s else ""
        err_console.print(
            f"connections {escape(change.route)}: {change.limit} ({change.reason}){after}",
            highlight=False,
        )


class _Json:
    """One JSON object per finished job on standard output."""

    def job_started(self, job: "Job", action: "Action") -> None:
        return None

    def job_finished(self, row: "PredictionRow", done: int, total: int) -> None:
        sys.stdout.write(json.dumps(row.to_dict(), sort_keys=True) + "\n")
        sys.stdout.flush()

    def limit_changed(self, change: "LimitChange") -> None:
        return None  # the changes are in DIR/limits.jsonl


ManifestArgument = Annotated[
    Path, typer.Argument(metavar="EXPERIMENT", help="The study's manifest (YAML or JSON).")
]
StudyDirOption = Annotated[
    Path, typer.Option(metavar="DIR", help="The study's folder: traces, predictions, lock.")
]
JobsOption = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        min=1,
        max=256,
        metavar="N",
        help="Jobs at once (default: the manifest's max_parallel_jobs, else 4).",
    ),
]
RetryFailedOption = Annotated[
    bool, typer.Option("--retry-failed", help="Run the failed jobs again.")
]
ForceStudyOption = Annotated[
    bool,
    typer.Option(
        help="Run this study into a folder that holds another one; its jobs start afresh."
    ),
]
ResolutionLabelsOption = Annotated[
    Path | None,
    typer.Option(
        metavar="PATH",
        help="Labels, read for their resolution dates alone: the forecast window ends there "
        "and near_resolution is the day before.",
    ),
]
JobsJsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object per job, then a summary.")
]
ExecutorOption = Annotated[
    str,
    typer.Option(
        metavar="local|ray",
        help="Where the jobs run: in this process, or as Ray tasks on a cluster (needs "
        "worldsim[ray]); results are the same.",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        metavar="ADDR",
        help="The Ray cluster's address (`ray start --head` prints it; 'auto' finds one on "
        "this machine; 'local' starts a new one). Default: RAY_ADDRESS, else a cluster "
        "`ray start` started here, else a new local Ray for this study.",
    ),
]


@app.command()
def batch(
    manifest: ManifestArgument,
    out: StudyDirOption,
    jobs: JobsOption = None,
    retry_failed: RetryFailedOption = False,
    force: ForceStudyOption = False,
    labels: ResolutionLabelsOption = None,
    json_out: JobsJsonOption = False,
    cache_dir: CacheDirOption = None,
    preflight: PreflightOption = None,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Run a study: every card × method × forecast date × seed of EXPERIMENT, into DIR.

    On a terminal a live display shows jobs done, running and failed, requests, tokens and
    cost per route against the budget, and an ETA; otherwise one line per finished job.

    Rerunning the same command finishes an interrupted study: complete traces are kept,
    torn ones resumed (their recorded model calls are not asked again), failed ones kept
    unless --retry-failed. DIR/jobs.jsonl logs each finished job's trace and head hash;
    DIR/experiment.lock.json holds the manifest, its hash and every job it plans;
    DIR/predictions.csv and .jsonl (one row per job) are derived from the traces when the
    study ends or is interrupted. Score it with
    `worldsim score DIR --labels ...`.

    With --executor ray the jobs run as Ray tasks on a cluster (each trace comes back into
    DIR); the budget and connection limits stay global to the study.
    """
    import contextlib

    import anyio

    from worldsim.domain.errors import ConfigError
    from worldsim.domain.files import check_folder_target
    from worldsim.study.manifest import load_study
    from worldsim.study.ray_executor import RayExecutor
    from worldsim.study.runner import run_study

    if executor not in ("local", "ray"):
        raise ConfigError(f"--executor must be local or ray, not '{executor}'", field="executor")
    if ray_address is not None and executor != "ray":
        raise ConfigError("--ray-address needs --executor ray", field="ray_address")
    study = load_study(manifest)
    check_folder_target(out, "--out")
    _preflight(study, cache_dir, preflight)
    started = time.perf_counter()
    observer, live = _observer(study, json_out)
    with (
        on_interrupt(
            lambda: (
                f"the study in {out} is unfinished; the same `worldsim batch` command "
                "finishes it (complete traces are kept, torn ones resumed)"
            )
        ),
        live or contextlib.nullcontext(),
    ):
        result = anyio.run(
            lambda: run_study(
                study,
                out,
                max_parallel_jobs=jobs,
                retry_failed=retry_failed,
                force=force,
                labels=labels,
                observer=observer,
                cache_dir=cache_dir,
                executor=RayExecutor(ray_address) if executor == "ray" else None,
            )
        )
    _print_summary(study, result, out, time.perf_counter() - started, json_out)
    if result.failed or result.pending:
        raise typer.Exit(1)


def _preflight(study: "Study", cache_dir: Path | None, preflight: bool | None) -> None:
    """Measure each remote route of the study's methods once, before any job starts."""
    measured: set[str] = set()
    card, card_path = study.cards[0]
    for method in study.methods:
        models = method.config(card, card_path).models
        if cache_dir is not None and models.cache_dir is None:
            models = models.model_copy(update={"cache_dir": cache_dir})
        preflight_routes(models, preflight, measured)


def _observer(study: "Study", json_out: bool) -> "tuple[StudyObserver, Live | None]":
    """What reports the jobs: a live display on a terminal, else a line (or JSON) per job."""
    if json_out or not out_console.is_terminal:
        return (_Json() if json_out else _Lines()), None
    from rich.console import Console
    from rich.live import Live

    from worldsim.study.progress import StudyProgress

    manifest = study.manifest
    progress = StudyProgress(
        study.name,
        total=len(study.cards)
        * len(study.methods)
        * len(manifest.forecast_dates)
        * len(manifest.seeds),
        budget_usd=manifest.max_cost_usd,
    )
    # its own console: rich's Live enters its console as a context manager
    return progress, Live(get_renderable=progress.render, console=Console(), refresh_per_second=4)


def _print_summary(
    study: "Study", result: "StudyResult", out: Path, wall: float, json_out: bool
) -> None:
    """The study's one closing line (or JSON object): its jobs, what ran, cost and wall time."""
    total = len(result.rows)
    summary: dict[str, Any] = {
        "study": study.name,
        "jobs": total,
        "ran": result.ran,
        "kept": result.kept,
        "failed": result.failed,
        "pending": result.pending,
        "cost_usd": round(sum(r.cost_usd for r in result.rows), 6),
        "wall_s": round(wall, 3),
        "out": str(out),
    }
    if json_out:
        sys.stdout.write(json.dumps({"summary": summary}, sort_keys=True) + "\n")
        return
    where = f"{escape(study.name)} are done in {escape(str(out))}"
    if result.nothing_to_do:
        line = f"nothing to do: all {total} jobs of study {where}"
        if result.failed:
            line += f" ({result.failed} failed; --retry-failed runs them again)"
    else:
        line = (
            f"study {escape(study.name)}: {total} jobs · {result.ran} ran · {result.kept} kept · "
            f"{result.failed} failed · {result.pending} pending · "
            f"${summary['cost_usd']:.4f} · wall {wall:.2f} s → {escape(str(out))}"
        )
    out_console.print(line, highlight=False)
