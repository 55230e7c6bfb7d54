"""What a study leaves in its folder besides its traces: ``experiment.lock.json`` (the manifest,
its hash, the worldsim version and every job it plans: its card, method, condition, forecast
date, seed and trace), written once as the study starts; ``jobs.jsonl``, the job log each
finished job appends to (its trace's head; :mod:`worldsim.study.journal`); and the tables
``predictions.csv``, ``predictions.jsonl`` (one row per job) and ``aggregates.csv``, derived from
the traces for people and other tools when the study ends or is interrupted. worldsim never
reads the tables back: what it shows of a study comes from the verified traces
(:mod:`worldsim.study.folder`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from worldsim.domain.cards import utc_iso
from worldsim.domain.errors import ConfigError
from worldsim.domain.files import load_document, write_files
from worldsim.domain.version import __version__
from worldsim.scoring.aggregates import AGGREGATES, aggregates_csv
from worldsim.study.jobs import Job
from worldsim.study.manifest import Study
from worldsim.trace.reader import Trace

__all__ = [
    "LOCK",
    "PLAN_KEYS",
    "PREDICTIONS",
    "PredictionRow",
    "Status",
    "job_plan",
    "read_lock",
    "row_for",
    "write_lock",
    "write_tables",
]

LOCK = "experiment.lock.json"
PREDICTIONS = "predictions"
Status = Literal["complete", "failed", "pending"]
_COLUMNS = (
    "card_id",
    "method",
    "condition",
    "forecast_date",
    "as_of",
    "seed",
    "kind",
    "p_yes",
    "p_options",
    "unresolved_mass",
    "status",
    "error",
    "calls",
    "tokens",
    "cost_usd",
    "wall_s",
    "trace",
    "head",
    "canonical_hash",
)


@dataclass(frozen=True, slots=True)
class PredictionRow:
    """One job's forecast and what it cost. ``as_of`` is the forecast date as a moment;
    ``trace`` is relative to the study folder; ``head`` is the trace's head hash."""

    card_id: str
    method: str
    condition: str
    forecast_date: str
    as_of: str
    seed: int
    kind: str
    p_yes: float | None
    p_options: dict[str, float] | None
    unresolved_mass: float | None
    status: Status
    error: str | None
    calls: int
    tokens: int
    cost_usd: float
    wall_s: float | None
    trace: str
    head: str | None
    canonical_hash: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PLAN_KEYS = ("card_id", "method", "condition", "forecast_date", "as_of", "seed", "kind", "trace")
"""What the lock records of each job (:func:`job_plan`)."""


def job_plan(job: Job) -> dict[str, Any]:
    """What the lock records of a job: who it is and where its trace goes."""
    return {
        "card_id": job.card_id,
        "method": job.method,
        "condition": job.condition,
        "forecast_date": job.date_name,
        "as_of": utc_iso(job.when),
        "seed": job.seed,
        "kind": job.config.card.kind,
        "trace": job.trace.as_posix(),
        **({"continues": job.previous.as_posix()} if job.previous is not None else {}),
    }


def row_for(
    plan: Mapping[str, Any],
    trace: Trace | None,
    wall_s: float | None,
    error: str | None,
    *,
    canonical: str | None = None,
) -> PredictionRow:
    """The row of the job ``plan`` names (:func:`job_plan`) from its trace (None: the job has
    not run); ``canonical`` is the trace's canonical hash, where it was taken."""
    base: dict[str, Any] = {
        **{key: plan[key] for key in PLAN_KEYS},
        "wall_s": None if wall_s is None else round(wall_s, 4),
    }
    if trace is None:
        return PredictionRow(
            **base,
            p_yes=None,
            p_options=None,
            unresolved_mass=None,
            status="failed" if error else "pending",
            error=error,
            calls=0,
            tokens=0,
            cost_usd=0.0,
            head=None,
            canonical_hash=None,
        )
    calls = tokens = 0
    cost = 0.0
    for line in trace.of_type("llm_call"):
        data = line.data
        if data.cache == "hit":
            continue  # answered from the cache: nothing was paid
        calls += 1
        tokens += data.usage.input_tokens + data.usage.output_tokens
        cost += data.paid_usd
    extraction = next(
        (ln.data for ln in reversed(trace.effective) if ln.type == "extraction"), None
    )
    complete = trace.complete
    terminal = trace.terminal
    if error is None and terminal is not None and terminal.type == "run_failed":
        error = terminal.data.error
    return PredictionRow(
        **base,
        p_yes=extraction.p_yes if complete and extraction else None,
        p_options=extraction.p_options if complete and extraction else None,
        unresolved_mass=extraction.unresolved_mass if complete and extraction else None,
        status="complete" if complete else ("failed" if error else "pending"),
        error=None if complete else error,
        calls=calls,
        tokens=tokens,
        cost_usd=round(cost, 8),
        head=trace.head,
        canonical_hash=canonical if complete else None,
    )


def _csv(rows: list[PredictionRow]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_COLUMNS)
    for row in rows:
        data = row.to_dict()
        options = data["p_options"]
        data["p_options"] = json.dumps(options, sort_keys=True) if options is not None else None
        writer.writerow(["" if data[c] is None else data[c] for c in _COLUMNS])
    return buffer.getvalue().encode()


def _jsonl(rows: list[PredictionRow]) -> bytes:
    return "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in rows).encode()


def write_lock(out: Path, study: Study, jobs: Sequence[Job], identity: str) -> None:
    """Write the lock atomically: the study, its hash with its jobs' dates (``identity``, what
    a rerun must match) and every job it plans."""
    doc = {
        "name": study.name,
        "study_sha256": identity,
        "manifest": study.manifest.model_dump(mode="json"),
        "manifest_path": str(study.path),
        "manifest_sha256": study.sha256,
        "worldsim_version": __version__,
        "jobs": [job_plan(job) for job in jobs],
    }
    write_files({out / LOCK: (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()})


def write_tables(out: Path, rows: Sequence[PredictionRow]) -> None:
    """Write the predictions (CSV and JSONL) and their seed aggregates, each atomically."""
    listed = list(rows)
    write_files(
        {
            out / f"{PREDICTIONS}.csv": _csv(listed),
            out / f"{PREDICTIONS}.jsonl": _jsonl(listed),
            out / AGGREGATES: aggregates_csv(listed),
        }
    )


def read_lock(out: Path) -> dict[str, Any] | None:
    """The study folder's lock, or None if the folder holds no study."""
    path = out / LOCK
    if not path.is_file():
        return None
    doc = load_document(path, what="study lock", error=ConfigError)
    if not isinstance(doc, dict) or not isinstance(doc.get("manifest_sha256"), str):
        raise ConfigError("not a study lock", file=path, field="manifest_sha256")
    return doc
