"""A study folder (``worldsim batch --out DIR``) as the viewer's data: every job the study
plans, whether its trace verifies and has the head the study's job log recorded, its numbers as
that verified trace gives them, summaries per method × condition × forecast date, and, given
labels, the scores ``worldsim score`` computes.

A job's trace is checked like a trace page's input (:func:`worldsim.trace.verify.verify_trace`)
and against its job log line (its anchor). A trace that does not verify, or verifies with
another head than the log's, is flagged on its row, shows no number and is left out of the
scores; one that does not verify gets no page, as ``worldsim view`` refuses it alone. The
study's predictions tables are never read for a number: a table line that no longer agrees
with its trace is named in the page's notes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from worldsim.domain.errors import ConfigError, TraceError
from worldsim.study.folder import StudyFolder, open_study, other_job, table_disagreements
from worldsim.study.outputs import row_for
from worldsim.view.extract import Verified, verified

if TYPE_CHECKING:
    from worldsim.scoring.study_tables import StudyTables

__all__ = [
    "JobCheck",
    "check_jobs",
    "load_study",
    "paired_data",
    "study_data",
    "study_scores",
    "summaries",
    "view_segments",
]

_GROUP = ("method", "condition", "forecast_date")
_PAIR = ("card_id", "method", "forecast_date", "seed")


@dataclass(frozen=True, slots=True)
class JobCheck:
    """A job's trace against its job log line: ``state`` is ``ok``, ``anchor`` (verifies, another
    head), ``invalid`` (does not verify), ``absent`` (no trace file) or ``pending`` (the job has
    not ended)."""

    state: str
    note: str
    verification: Verified | None = None

    @property
    def verifies(self) -> bool:
        """The trace is sound (it has a page), whatever its head."""
        return self.state in ("ok", "anchor")

    @property
    def usable(self) -> bool:
        """Sound and anchored: its forecast may be scored."""
        return self.state == "ok"


def load_study(folder: Path) -> StudyFolder:
    """The study in ``folder``; a folder without a lock is bad input."""
    study = open_study(folder)
    if study is None:
        raise ConfigError("not a study folder: it has no experiment.lock.json", file=folder)
    return study


def view_segments(row: dict[str, Any]) -> list[str]:
    """Where a job's page goes under the pages folder: its trace path below ``traces/``, as
    ``.html``. A path that would leave that folder is bad input."""
    path = PurePosixPath(str(row.get("trace", "")))
    parts = list(path.with_suffix(".html").parts)
    if len(parts) < 2 or parts[0] != "traces" or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(f"a job's trace path {str(path)!r} is not under traces/", field="trace")
    return parts[1:]


def check_jobs(study: StudyFolder) -> Iterator[tuple[dict[str, Any], JobCheck]]:
    """Each planned job's row and check, one trace verified at a time (a caller may write its
    page and let it go before the next); a row's numbers are its verified trace's."""
    for plan in study.plans:
        yield _check(study, plan)


def _check(study: StudyFolder, plan: dict[str, Any]) -> tuple[dict[str, Any], JobCheck]:
    """Verify as a trace page does (:func:`~worldsim.view.extract.verified`), then the anchor."""
    done = study.finished.get(plan["trace"])
    if done is None:
        return row_for(plan, None, None, None).to_dict(), JobCheck("pending", "not run yet")
    refused = row_for(plan, None, done.wall_s, done.error or "its trace is refused").to_dict()
    if done.head is None:  # it failed before its trace held a record
        return refused, JobCheck("failed", done.error or "the run failed")
    path = study.path / plan["trace"]
    if not path.is_file():
        return refused, JobCheck("absent", "no trace")
    try:
        result = verified(path)
    except TraceError as exc:
        where = f" (line {exc.line})" if exc.line else ""
        return refused, JobCheck("invalid", f"{exc.message}{where}")
    head = str(result.head)
    if head != done.head:
        note = f"head {head[:12]} differs from the job log's {done.head[:12]}"
        return refused, JobCheck("anchor", note, result)
    problem = other_job(plan, result.trace.started)
    if problem is not None:
        return refused, JobCheck("invalid", problem, result)
    row = row_for(plan, result.trace, done.wall_s, None).to_dict()
    return row, JobCheck("ok", "verifies; head matches the job log", result)


def study_data(
    study: StudyFolder,
    checked: list[tuple[dict[str, Any], JobCheck]],
    *,
    files: str,
    scores: dict[str, Any] | None,
) -> dict[str, Any]:
    """The study page's data. ``files`` is the folder of job pages, relative to the page."""
    jobs = [_job(row, check) for row, check in checked]
    lock = study.lock
    verified_rows = {str(row["trace"]): row for row, check in checked if check.usable}
    return {
        "kind": "study",
        "name": lock.get("name"),
        "folder": str(study.path),
        "manifest_sha256": lock.get("manifest_sha256"),
        "worldsim_version": lock.get("worldsim_version"),
        "files": files,
        "jobs": jobs,
        "summary": summaries(jobs),
        "scores": scores,
        "notes": table_disagreements(study, verified_rows),
    }


def _job(row: dict[str, Any], check: JobCheck) -> dict[str, Any]:
    keys = ("card_id", "method", "condition", "forecast_date", "seed", "status", "p_yes")
    more = ("p_options", "unresolved_mass", "calls", "tokens", "cost_usd", "wall_s", "error")
    return {
        **{k: row.get(k) for k in (*keys, *more, "trace")},
        "check": check.state,
        "check_note": check.note,
        "view": view_segments(row) if check.verifies else None,
    }


def summaries(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per method × condition × forecast date: job counts by status and check, the mean and
    spread of p_yes over the jobs whose traces check out, and what they cost."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for job in jobs:
        groups.setdefault(tuple(str(job[k]) for k in _GROUP), []).append(job)
    out = []
    for key, members in groups.items():
        ps = [float(j["p_yes"]) for j in members if j["check"] == "ok" and j["p_yes"] is not None]
        mean = math.fsum(ps) / len(ps) if ps else None
        spread = (
            math.sqrt(math.fsum((p - mean) ** 2 for p in ps) / (len(ps) - 1))
            if mean is not None and len(ps) > 1
            else None
        )
        out.append(
            {
                **dict(zip(_GROUP, key, strict=True)),
                "jobs": len(members),
                "complete": _count(members, lambda j: j["status"] == "complete"),
                "failed": _count(members, lambda j: j["status"] == "failed"),
                "pending": _count(members, lambda j: j["status"] == "pending"),
                "flagged": _count(members, lambda j: j["check"] in ("anchor", "invalid")),
                "mean_p_yes": mean,
                "sd_p_yes": spread,
                "tokens": sum(int(j["tokens"] or 0) for j in members),
                "cost_usd": math.fsum(float(j["cost_usd"] or 0.0) for j in members),
            }
        )
    return out


def _count(jobs: list[dict[str, Any]], test: Callable[[dict[str, Any]], bool]) -> int:
    return sum(1 for j in jobs if test(j))


def paired_data(
    a: tuple[Path, list[dict[str, Any]]], b: tuple[Path, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Two studies' jobs paired by (card, method, forecast date, seed): p_yes in each and
    B − A, for the pairs whose forecasts both exist and whose traces both check out; per card,
    the mean difference. ``a`` and ``b`` are a folder and its study page's jobs."""
    right = {_key(j): j for j in b[1]}
    pairs: list[dict[str, Any]] = []
    left_only = excluded = 0
    for job in a[1]:
        other = right.pop(_key(job), None)
        if other is None:
            left_only += 1
        elif not (_pairable(job) and _pairable(other)):
            excluded += 1
        else:
            pairs.append(
                {
                    **dict(zip(_PAIR, _key(job), strict=True)),
                    "p_a": job["p_yes"],
                    "p_b": other["p_yes"],
                    "diff": float(other["p_yes"]) - float(job["p_yes"]),
                }
            )
    by_card: dict[str, list[float]] = {}
    for pair in pairs:
        by_card.setdefault(str(pair["card_id"]), []).append(pair["diff"])
    return {
        "kind": "studies",
        "folders": [str(a[0]), str(b[0])],
        "pairs": pairs,
        "cards": [
            {"card_id": card, "n": len(d), "mean_diff": math.fsum(d) / len(d)}
            for card, d in sorted(by_card.items())
        ],
        "unpaired": {"a": left_only, "b": len(right)},
        "excluded": excluded,
    }


def _key(job: dict[str, Any]) -> tuple[str, str, str, int]:
    return (str(job["card_id"]), str(job["method"]), str(job["forecast_date"]), int(job["seed"]))


def _pairable(job: dict[str, Any]) -> bool:
    return job["check"] == "ok" and job["p_yes"] is not None


def study_scores(
    study: StudyFolder, checked: list[tuple[dict[str, Any], JobCheck]], labels: Path
) -> dict[str, Any]:
    """What ``worldsim score FOLDER --labels LABELS --compare FIRST:M ...`` reports (the first
    method of the study is the baseline of each paired comparison), over the traces that check
    out, with the study's tables per method, condition and date when every trace does."""
    from worldsim.scoring.analysis import ScoreOptions, score
    from worldsim.scoring.labels import load_labels
    from worldsim.scoring.report import to_json
    from worldsim.scoring.study_tables import study_tables

    heads = study.heads()
    usable = [row for row, check in checked if check.usable]
    traces = sorted(study.path / str(row["trace"]) for row in usable)
    methods = list(dict.fromkeys(str(row["method"]) for row, _ in checked))
    options = ScoreOptions(
        inputs=tuple(traces),
        labels=labels,
        compare=tuple((methods[0], m) for m in methods[1:]),
        split_versions=True,
        heads={t: heads[t] for t in traces},
    )
    doc = to_json(score(options))
    keep = ("metric", "n_cards", "n_units", "methods", "comparisons", "calibration", "coverage")
    flagged = sum(1 for _, check in checked if check.state in ("absent", "anchor", "invalid"))
    rows = [{**row, "trace": str((study.path / str(row["trace"])).resolve())} for row in usable]
    tables = None if flagged else _tables(study_tables(rows, load_labels(labels)))
    return {"labels": str(labels), **{k: doc[k] for k in keep}, "tables": tables}


def _tables(tables: StudyTables) -> dict[str, Any]:
    return {
        "by": {key: tables.by(key) for key in _GROUP},
        "dates": list(tables.dates),
        "accuracy_by_date": tables.accuracy_by_date(),
    }
