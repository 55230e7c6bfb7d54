"""Running a study: its jobs concurrently, in one process, through the engine ``worldsim run``
uses; resumable as a whole.

Before anything runs, every job's trace is looked at: a complete trace is kept (its head hash
must be the one the study's job log recorded), a torn one is resumed, a failed one is kept as
failed unless ``retry_failed``, and a missing one is run. The lock (the study and every job it
plans) is written first, so a folder always says which study it holds; a different study in the
same folder is an error unless ``force``. Each job that ends appends one line to the job log
(its trace's head, :mod:`worldsim.study.journal`), whatever the study's size; the predictions
tables are written once, when the study ends or is interrupted. Every job's completed model
calls are answered from the study's response cache (the user-level cache, or the folder
``--cache-dir`` or a method names), so a resumed job pays for none of them again.

The study's ``max_cost_usd`` is one budget shared by every run: it starts from what the
folder's traces record as spent (so a resumed study continues it), each call is checked against
it and charged to it, and no job starts once it is exhausted. A run it stops ends resumable and
the job is failed; ``--retry-failed`` with a larger ``max_cost_usd`` continues it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, TypedDict

import anyio

from worldsim.domain.cards import Card
from worldsim.domain.errors import ConfigError, TraceError, WorldsimError
from worldsim.domain.paths import held_folder, make_folder
from worldsim.models import Budget
from worldsim.models.limits import LimitChange
from worldsim.scoring.labels import load_labels
from worldsim.scoring.units import date_text
from worldsim.sim.resume import has_world
from worldsim.study.dates import window
from worldsim.study.execution import (
    STUDY_BUDGET_RAISED_BY,
    Action,
    Executor,
    JobRunner,
    JobSettings,
    LocalExecutor,
)
from worldsim.study.jobs import Job, expand_jobs
from worldsim.study.journal import JOURNAL, Finished, Journal, read_journal
from worldsim.study.limits import study_limiters
from worldsim.study.manifest import Study
from worldsim.study.outputs import (
    LOCK,
    PREDICTIONS,
    PredictionRow,
    job_plan,
    read_lock,
    row_for,
    write_lock,
    write_tables,
)
from worldsim.trace.canonical import CanonicalHash
from worldsim.trace.reader import Trace, read_trace

__all__ = [
    "Action",
    "StudyObserver",
    "StudyOptions",
    "StudyResult",
    "plan_jobs",
    "resolution_dates",
    "run_study",
]


class StudyObserver(Protocol):
    """What a progress display is told: a job starts, a job ends. The plain line log and
    ``--json`` implement it; a live display can too."""

    def job_started(self, job: Job, action: Action) -> None: ...

    def job_finished(self, row: PredictionRow, done: int, total: int) -> None: ...

    def limit_changed(self, change: LimitChange) -> None: ...


@dataclass(frozen=True, slots=True)
class StudyResult:
    """Every job's row, in job order, and what this invocation did."""

    rows: tuple[PredictionRow, ...]
    ran: int
    kept: int

    @property
    def nothing_to_do(self) -> bool:
        return self.ran == 0

    @property
    def failed(self) -> int:
        return sum(r.status == "failed" for r in self.rows)

    @property
    def pending(self) -> int:
        return sum(r.status == "pending" for r in self.rows)


def resolution_dates(labels: Path, cards: Iterable[Card]) -> dict[str, datetime | None]:
    """Each card's resolution date from its label, and nothing else of the label. A label
    resolved before its card's forecast window opens is refused (CardError naming the label's
    file, line and ``resolved_at``): there is no moment left to forecast it from."""
    entries = load_labels(labels).entries
    dates: dict[str, datetime | None] = {}
    for card in cards:
        entry = entries.get(card.id)
        resolved = entry.label.resolved_at if entry is not None else None
        start = window(card)[0]
        if entry is not None and resolved is not None and resolved <= start:
            raise entry.refuse(
                f"card '{card.id}' resolved at {date_text(resolved)}, not after its forecast "
                f"window opens ({date_text(start)}): there is nothing left to forecast",
                field="resolved_at",
            )
        dates[card.id] = resolved
    return dates


def _identity(study: Study, jobs: list[Job]) -> str:
    """The study's hash together with the dates its jobs were given (labels can move them)."""
    dates = [[job.trace.as_posix(), job.when.isoformat()] for job in jobs]
    blob = json.dumps([study.sha256, dates], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _grew_from(trace: Trace, head: str) -> bool:
    """Whether ``head`` is the head of one of the trace's lines: the trace is that one and more."""
    return any(hashlib.sha256(line.raw).hexdigest() == head for line in trace.lines)


def _action(job: Job, out: Path, heads: Mapping[str, str | None], retry_failed: bool) -> Action:
    path = out / job.trace
    if not path.exists():
        return "run"
    try:
        trace = read_trace(path)
    except TraceError:
        if path.stat().st_size == 0:
            return "restart"  # killed before its first record
        raise
    recorded = heads.get(job.trace.as_posix())
    # an ended job's trace may only have grown since (a resume of its failure, cut short)
    if (
        recorded is not None
        and recorded != trace.head
        and (trace.complete or not _grew_from(trace, recorded))
    ):
        raise TraceError(
            "trace differs from the one the study recorded (its head hash changed); "
            "remove it, or run with --force",
            file=path,
        )
    if trace.complete:
        return "keep"
    resumable = job.config.kind == "multiverse" and has_world(trace)
    terminal = trace.terminal
    if terminal is not None and terminal.type == "run_failed":
        if not retry_failed:
            return "keep_failed"
        return "resume" if resumable and terminal.data.resumable else "restart"
    return "resume" if resumable else "restart"


def plan_jobs(
    study: Study, jobs: list[Job], out: Path, *, retry_failed: bool = False, force: bool = False
) -> list[Action]:
    """What each job needs; a different study already in ``out`` is a ConfigError unless
    ``force`` (then every job starts afresh)."""
    lock = read_lock(out)
    if lock is not None and lock.get("study_sha256") != _identity(study, jobs):
        if not force:
            raise ConfigError(
                f"{out} holds another study ('{lock.get('name')}', or these cards, dates or "
                "labels changed); use another --out, or --force to run this one into it",
                file=out / LOCK,
                field="study_sha256",
            )
        return ["restart" if (out / job.trace).exists() else "run" for job in jobs]
    heads = {trace: done.head for trace, done in read_journal(out).items()}
    return [_action(job, out, heads, retry_failed) for job in jobs]


def _study_budget(study: Study, jobs: list[Job], out: Path) -> Budget:
    """The study's one budget, continuing from what its traces record as spent; without a cap
    it refuses nothing, and is shared all the same, so that a route distrusted in one job (its
    provider over-reported usage) is refused in every job."""
    cap = study.manifest.max_cost_usd
    if cap is None:
        return Budget()  # what was spent matters only to a cap: no trace is read for it
    spent = 0.0
    for job in jobs:
        trace = _read(out / job.trace) if (out / job.trace).exists() else None
        if trace is not None:
            spent += row_for(job_plan(job), trace, None, None).cost_usd
    return Budget(cap, spent_usd=spent, raised_by=STUDY_BUDGET_RAISED_BY)


def _row(job: Job, folder: Path, wall_s: float | None, error: str | None) -> PredictionRow:
    """The row of a job that has run, from its trace as it stands (with its canonical hash)."""
    trace = _read(folder / job.trace)
    canonical = CanonicalHash.of(trace.effective) if trace is not None and trace.complete else None
    return row_for(job_plan(job), trace, wall_s, error, canonical=canonical)


def _read(path: Path) -> Trace | None:
    try:
        return read_trace(path)
    except TraceError:
        return None


def _open_folder(
    folder: Path, study: Study, jobs: list[Job], identity: str, *, fsync: bool
) -> Journal:
    """The folder names its study before any job runs: its lock is written unless it already
    plans these jobs (another study's job log goes with the lock it belonged to, which only
    ``force`` lets a run replace). Returns the job log, open for appending."""
    lock = read_lock(folder)
    try:
        if lock is None or lock.get("study_sha256") != identity or "jobs" not in lock:
            (folder / JOURNAL).unlink(missing_ok=True)
            make_folder(folder)
            write_lock(folder, study, jobs, identity)
        return Journal(folder, fsync=fsync)
    except OSError as exc:
        raise ConfigError(f"cannot write: {exc.strerror or exc}", file=folder / JOURNAL) from None


def _ended(row: PredictionRow) -> Finished:
    """The job log's line for a job that ended with ``row``."""
    return Finished(
        trace=row.trace,
        head=row.head,
        status="complete" if row.status == "complete" else "failed",
        error=row.error,
        wall_s=row.wall_s or 0.0,
    )


async def _run_jobs(
    study: Study,
    jobs: list[Job],
    actions: list[Action],
    todo: list[int],
    rows: list[PredictionRow],
    folder: Path,
    journal: Journal,
    walls: Mapping[str, float],
    *,
    max_parallel_jobs: int | None,
    observer: StudyObserver | None,
    environ: Mapping[str, str] | None,
    fsync: bool,
    cache_dir: Path | None,
    executor: Executor | None,
) -> None:
    """Run the jobs ``todo`` names, each ending with its row and its line in the job log."""
    limiter = anyio.CapacityLimiter(max_parallel_jobs or study.manifest.max_parallel_jobs)
    budget = _study_budget(study, jobs, folder)
    limiters = study_limiters(study, folder, observer.limit_changed if observer else None)
    settings = JobSettings(environ, fsync, cache_dir)
    done = len(jobs) - len(todo)

    index = {job.trace: i for i, job in enumerate(jobs)}
    finished = {i: anyio.Event() for i in todo}

    def ended(i: int) -> None:
        nonlocal done
        journal.record(_ended(rows[i]))
        done += 1
        if observer is not None:
            observer.job_finished(rows[i], done, len(jobs))

    async def run_one(runner: JobRunner, i: int) -> None:
        job, action = jobs[i], actions[i]
        async with limiter:
            if await runner.exhausted():
                cap = study.manifest.max_cost_usd
                rows[i] = row_for(
                    job_plan(job),
                    None,
                    None,
                    f"study budget of ${cap} reached; {STUDY_BUDGET_RAISED_BY}",
                )
            else:
                if observer is not None:
                    observer.job_started(job, action)
                started = time.perf_counter()
                error: str | None = None
                try:
                    await runner.execute(job, action, folder)
                except WorldsimError as exc:
                    error = str(exc)[:2000]
                wall = time.perf_counter() - started
                if action == "resume":
                    wall += walls.get(job.trace.as_posix(), 0.0)
                rows[i] = _row(job, folder, wall, error)
            ended(i)

    async def one(runner: JobRunner, i: int) -> None:
        """A rolling job waits for the job it continues, and runs only if that completed."""
        try:
            previous = jobs[i].previous
            if previous is not None:
                before = index[previous]
                if before in finished:
                    await finished[before].wait()
                if rows[before].status != "complete":
                    why = f"the job it continues ({previous.as_posix()}) did not complete"
                    rows[i] = row_for(job_plan(jobs[i]), None, None, why)
                    ended(i)
                    return
            await run_one(runner, i)
        finally:
            finished[i].set()

    opened = (executor or LocalExecutor()).open(budget, limiters, settings)
    async with opened as runner, anyio.create_task_group() as tg:
        for i in todo:
            tg.start_soon(one, runner, i)


class StudyOptions(TypedDict, total=False):
    """How a study runs, as `run_study` takes it (a library caller's keywords)."""

    max_parallel_jobs: int | None
    retry_failed: bool
    force: bool
    labels: Path | None
    observer: StudyObserver | None
    fsync: bool
    cache_dir: Path | None
    executor: Executor | None


STUDY_LOCK = ".batch.lock"
"""The study folder's lock file: the run holding it is the one writing the folder."""


async def run_study(
    study: Study,
    out: str | Path,
    *,
    max_parallel_jobs: int | None = None,
    retry_failed: bool = False,
    force: bool = False,
    labels: Path | None = None,
    observer: StudyObserver | None = None,
    environ: Mapping[str, str] | None = None,
    fsync: bool = True,
    cache_dir: Path | None = None,
    executor: Executor | None = None,
) -> StudyResult:
    """Run every job of ``study`` that is not done into ``out``; see the module's doc.

    ``cache_dir`` is the response cache's folder for every method that names none (default:
    the user-level cache, `worldsim.models.cache.default_cache_dir`).

    ``executor`` decides where the jobs run (default: `LocalExecutor`, in this process).

    ``labels`` gives the cards' resolution dates (for the forecast window and
    ``near_resolution``); nothing else of a label is read.

    One run at a time writes a study folder: it holds ``out/.batch.lock`` under an exclusive
    lock while it runs, and another run of the same folder is refused at once (ConfigError).
    """
    folder = Path(out)
    with held_folder(folder, STUDY_LOCK, "another batch is running this study"):
        cards = [card for card, _ in study.cards]
        resolved = resolution_dates(labels, cards) if labels else None
        jobs = expand_jobs(study, resolved)
        actions = plan_jobs(study, jobs, folder, retry_failed=retry_failed, force=force)
        identity = _identity(study, jobs)
        logged = {} if force else read_journal(folder)
        walls = {trace: done.wall_s for trace, done in logged.items()}
        rows = [
            _row(job, folder, walls.get(job.trace.as_posix()), None)
            if action in ("keep", "keep_failed")
            else row_for(job_plan(job), None, None, None)
            for job, action in zip(jobs, actions, strict=True)
        ]
        todo = [i for i, action in enumerate(actions) if action not in ("keep", "keep_failed")]
        journal = _open_folder(folder, study, jobs, identity, fsync=fsync)
        try:
            for row in rows:  # a job that ended before its line was written (a kill between)
                if row.status != "pending" and row.trace not in logged:
                    journal.record(_ended(row))
            if todo:
                await _run_jobs(
                    study,
                    jobs,
                    actions,
                    todo,
                    rows,
                    folder,
                    journal,
                    walls,
                    max_parallel_jobs=max_parallel_jobs,
                    observer=observer,
                    environ=environ,
                    fsync=fsync,
                    cache_dir=cache_dir,
                    executor=executor,
                )
        finally:
            journal.close()
            if todo or not (folder / f"{PREDICTIONS}.jsonl").is_file():
                write_tables(folder, rows)  # also when interrupted: what is done so far
        return StudyResult(tuple(rows), ran=len(todo), kept=len(jobs) - len(todo))
