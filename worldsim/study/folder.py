"""Reading a study folder back: the jobs its lock plans, how each ended (its job log), and
what each completed job's trace gives, verified.

Every number ``score``, ``view`` and ``export`` show for a study comes from here: from the trace
a job's log line names, checked as ``verify`` checks it and required to have the head that line
recorded. The predictions tables a study writes are derived copies for people; they are only
read to say where one no longer agrees with its trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from worldsim.domain.cards import parse_utc
from worldsim.domain.errors import ConfigError, TraceError
from worldsim.domain.files import read_jsonl
from worldsim.scoring.inputs import PredictionRow as ScoredRow
from worldsim.study.journal import Finished, read_journal
from worldsim.study.outputs import PLAN_KEYS, PREDICTIONS, PredictionRow, read_lock, row_for
from worldsim.trace.reader import Trace, iter_trace, read_trace, trace_head
from worldsim.trace.verify import Verification, verify_trace

__all__ = [
    "JobCheck",
    "Read",
    "StudyFolder",
    "check_jobs",
    "expand_study_inputs",
    "open_study",
    "other_job",
    "read_verified",
    "scored_rows",
    "table_disagreements",
    "unfinished_notes",
    "usable_rows",
]


@dataclass(frozen=True, slots=True)
class StudyFolder:
    """A study folder as its lock and job log describe it."""

    path: Path
    lock: dict[str, Any]
    plans: tuple[dict[str, Any], ...]
    finished: Mapping[str, Finished]

    @property
    def name(self) -> str:
        return str(self.lock.get("name"))

    def heads(self) -> dict[Path, str]:
        """Each completed job's trace and the head its log line recorded, in job order."""
        out: dict[Path, str] = {}
        for plan in self.plans:
            done = self.finished.get(plan["trace"])
            if done is not None and done.status == "complete" and done.head is not None:
                out[self.path / plan["trace"]] = done.head
        return out

    def refuse_other_jobs(self) -> None:
        """Refuse (TraceError naming it) a completed job's trace that another job ran: its
        ``run_started`` names another card, method, seed or date than the job's plan. The
        head the job log recorded then pins the rest."""
        for plan in self.plans:
            path = self.path / plan["trace"]
            done = self.finished.get(plan["trace"])
            if done is None or not path.is_file():
                continue  # not run, or missing: the reader says so
            first = next(iter_trace(path), None)
            problem = other_job(plan, first.data) if first is not None else None
            if problem is not None and trace_head(path) == done.head:
                raise TraceError(problem, file=path)  # else the reader's head check refuses it

    @property
    def unfinished(self) -> str | None:
        """What a reader of the study's scores must be told when some planned jobs have no
        result (not run yet, or failed): how many, and how to finish the study; else None."""
        pending = failed = 0
        for plan in self.plans:
            done = self.finished.get(plan["trace"])
            if done is None:
                pending += 1
            elif done.status != "complete" or done.head is None:
                failed += 1
        if not pending and not failed:
            return None
        total = len(self.plans)
        return (
            f"{pending + failed} of {total} planned jobs have no result ({pending} not run "
            f"yet, {failed} failed): the scores cover the other {total - pending - failed}; "
            f"finish the study with `worldsim batch MANIFEST --out {self.path}"
            + (" --retry-failed`" if failed else "`")
        )

    def by_trace(self) -> dict[Path, dict[str, Any]]:
        """Each job's plan by the resolved path of its trace."""
        return {(self.path / plan["trace"]).resolve(): plan for plan in self.plans}


def open_study(folder: Path) -> StudyFolder | None:
    """The study in ``folder``, or None when the folder holds none (no lock). A lock that plans
    no jobs, or plans a trace outside the folder's ``traces/``, is bad input."""
    lock = read_lock(folder)
    if lock is None:
        return None
    jobs = lock.get("jobs")
    if not isinstance(jobs, list):
        raise ConfigError(
            "the study lock lists no jobs (written by another worldsim version?): run the "
            "study again with `worldsim batch ... --force`",
            file=folder / "experiment.lock.json",
            field="jobs",
        )
    plans = tuple(_plan(job, folder, i) for i, job in enumerate(jobs))
    return StudyFolder(folder, lock, plans, read_journal(folder))


def other_job(plan: Mapping[str, Any], started: Any) -> str | None:
    """What says a trace whose ``run_started`` is ``started`` is not the run of the job
    ``plan`` planned (another card, method, seed or forecast date); ``None`` when it is."""
    moment = started.forecast_date or started.card.get("as_of")
    ran = (started.card.get("id"), started.method, started.seed, _moment(moment))
    planned = (plan["card_id"], plan["method"], plan["seed"], _moment(plan["as_of"]))
    if ran == planned:
        return None
    return (
        f"the trace is not its job's: it ran card {ran[0]}, method {ran[1]}, seed {ran[2]} at "
        f"{moment}, where the study planned card {planned[0]}, method {planned[1]}, seed "
        f"{planned[2]} at {plan['as_of']}"
    )


def _moment(value: object) -> datetime | None:
    try:
        return parse_utc(value)
    except ValueError:
        return None


def _plan(job: object, folder: Path, i: int) -> dict[str, Any]:
    lock = folder / "experiment.lock.json"
    if not isinstance(job, dict) or any(key not in job for key in PLAN_KEYS):
        raise ConfigError("a job without its plan", file=lock, field=f"jobs.{i}")
    parts = PurePosixPath(str(job["trace"])).parts
    if len(parts) < 2 or parts[0] != "traces" or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(
            f"a job's trace path {job['trace']!r} is not under traces/",
            file=lock,
            field=f"jobs.{i}.trace",
        )
    return {key: job[key] for key in PLAN_KEYS}


def expand_study_inputs(inputs: Iterable[Path]) -> tuple[list[Path], list[Path], dict[Path, str]]:
    """Prediction inputs with each study folder replaced by its completed jobs' traces (as
    ``score`` and ``prereg lock`` read them); returns the inputs, the study folders, and the
    head each of their traces must have (its job log's)."""
    expanded: list[Path] = []
    studies: list[Path] = []
    heads: dict[Path, str] = {}
    for path in inputs:
        study = open_study(path) if path.is_dir() else None
        if study is None:
            expanded.append(path)
            continue
        studies.append(path)
        study.refuse_other_jobs()
        found = study.heads()
        expanded.extend(found)
        heads.update(found)
    return expanded, studies, heads


def unfinished_notes(studies: Iterable[Path]) -> list[str]:
    """``FOLDER: what is unfinished`` for each study folder with jobs that have no result."""
    notes = []
    for folder in studies:
        study = open_study(folder)
        if study is not None and study.unfinished is not None:
            notes.append(f"{folder}: {study.unfinished}")
    return notes


class Read(Protocol):
    """A job's trace read and verified, as a caller reads it (``score`` plainly, ``view`` with
    the replay its pages show)."""

    @property
    def verification(self) -> Verification: ...

    @property
    def trace(self) -> Trace: ...


R = TypeVar("R", bound=Read)


class _Read(NamedTuple):
    verification: Verification
    trace: Trace


def read_verified(path: Path) -> Read:
    """The trace at ``path``, read and verified (:func:`~worldsim.trace.verify.verify_trace`)."""
    trace = read_trace(path)
    return _Read(verify_trace(trace), trace)


@dataclass(frozen=True, slots=True)
class JobCheck(Generic[R]):
    """One job of a study: its row (numbers from its trace, verified) and its trace's check:
    ``ok``, ``pending`` (not run yet), ``failed`` (the run failed), ``absent`` (its trace is
    missing), ``invalid`` (its trace does not verify, is cut off though the job log says
    complete, or ran another job) or ``anchor`` (it verifies with another head than the job
    log's). Only an ``ok`` job's forecast may be shown or scored. ``read`` is the trace as read
    where it verifies (whatever else its check says); ``verified`` says it did."""

    row: PredictionRow
    state: str
    note: str
    read: R | None = None
    verified: bool = False

    @property
    def usable(self) -> bool:
        return self.state == "ok"

    @property
    def flagged(self) -> bool:
        """Its trace is missing or refused (not merely unfinished)."""
        return self.state in ("absent", "anchor", "invalid")


def check_jobs(study: StudyFolder, read: Callable[[Path], R]) -> Iterator[JobCheck[R]]:
    """Every planned job of ``study``, in job order, each trace read by ``read`` (one at a time:
    a caller may use it and let it go before the next) and checked against the head its job
    log recorded."""
    for plan in study.plans:
        yield _check(study, plan, read)


def _check(study: StudyFolder, plan: dict[str, Any], read: Callable[[Path], R]) -> JobCheck[R]:
    done = study.finished.get(plan["trace"])
    if done is None:
        return JobCheck(row_for(plan, None, None, None), "pending", "not run yet")
    why = done.error or "the run failed"
    if done.head is None:  # it failed before its trace held a record
        return JobCheck(row_for(plan, None, done.wall_s, why), "failed", why)
    path = study.path / plan["trace"]
    refused = row_for(plan, None, done.wall_s, "its trace is missing or refused")
    if not path.is_file():
        return JobCheck(refused, "absent", "no trace")
    try:
        found = read(path)
    except TraceError as exc:
        where = f" (line {exc.line})" if exc.line else ""
        return JobCheck(refused, "invalid", f"{exc.message}{where}")
    result = found.verification
    if result.head != done.head:
        note = f"head {str(result.head)[:12]} differs from the job log's {done.head[:12]}"
        return JobCheck(refused, "anchor", note, found, True)
    problem = other_job(plan, found.trace.started)
    if problem is not None:
        return JobCheck(refused, "invalid", problem, found, True)
    if (done.status == "complete") != result.complete:
        said = f"the job log says {done.status}; " + (
            result.why_incomplete or "its trace is complete"
        )
        return JobCheck(refused, "invalid", said, found, True)
    if done.status != "complete":
        return JobCheck(row_for(plan, found.trace, done.wall_s, why), "failed", why, found, True)
    row = row_for(plan, found.trace, done.wall_s, None)
    return JobCheck(row, "ok", "verifies; head matches the job log", found, True)


def usable_rows(study: StudyFolder, jobs: Iterable[JobCheck[Any]]) -> list[dict[str, Any]]:
    """The rows of the jobs whose traces verify with their logged heads (what tables and
    effects are computed over), each with its trace's resolved path."""
    return [
        {**job.row.to_dict(), "trace": str((study.path / job.row.trace).resolve())}
        for job in jobs
        if job.usable
    ]


def scored_rows(study: StudyFolder, rows: Iterable[ScoredRow]) -> list[dict[str, Any]]:
    """The study's jobs whose traces were scored (``rows``, read from the verified traces),
    each as its plan with the forecast its trace gave and its trace's resolved path, in job
    order."""
    forecasts = {Path(row.source).resolve(): row for row in rows if row.trace}
    out: list[dict[str, Any]] = []
    for path, plan in study.by_trace().items():
        row = forecasts.get(path)
        if row is not None:
            out.append(
                {
                    **plan,
                    "status": "complete",
                    "p_yes": row.p_yes,
                    "p_options": dict(row.p_options) if row.p_options is not None else None,
                    "trace": str(path),
                }
            )
    return out


def table_disagreements(study: StudyFolder, verified: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Where the study's ``predictions.jsonl`` (a derived table) no longer says what a verified
    trace gives (``verified``: each verified job's row by its trace, relative to the folder):
    one line each, naming the table's line. Its numbers are never used."""
    path = study.path / f"{PREDICTIONS}.jsonl"
    if not path.is_file():
        return []
    found: list[str] = []
    for number, record in read_jsonl(path, what="predictions", error=ConfigError):
        trace = str(record.get("trace"))
        row = verified.get(trace)
        if row is None:
            continue
        for field in ("p_yes", "unresolved_mass"):
            table, traced = record.get(field), row.get(field)
            if not _same(table, traced):
                found.append(
                    f"{path}:{number}: {field} {table!r} differs from its trace's {traced!r} "
                    f"({trace}); the table is derived, the trace's value is used"
                )
    return found


def _same(table: object, traced: object) -> bool:
    if not isinstance(traced, float) or table is None:
        return table is traced
    return isinstance(table, int | float) and math.isclose(float(table), traced, abs_tol=1e-12)
