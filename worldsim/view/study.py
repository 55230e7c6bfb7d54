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
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from worldsim.domain.errors import ConfigError
from worldsim.study.folder import JobCheck, StudyFolder, open_study, table_disagreements
from worldsim.study.folder import check_jobs as folder_checks
from worldsim.view.extract import Verified, verified

if TYPE_CHECKING:
    from worldsim.scoring.study_tables import StudyTables

__all__ = [
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


def check_jobs(study: StudyFolder) -> Iterator[JobCheck[Verified]]:
    """Each planned job's check (:func:`worldsim.study.folder.check_jobs`), its trace read as a
    trace page reads it (:func:`~worldsim.view.extract.verified`), one at a time (a caller may
    write its page and let it go before the next); a row's numbers are its verified trace's."""
    return folder_checks(study, verified)


def study_data(
    study: StudyFolder,
    checked: list[JobCheck[Any]],
    *,
    files: str,
    scores: dict[str, Any] | None,
) -> dict[str, Any]:
    """The study page's data. ``files`` is the folder of job pages, relative to the page."""
    jobs = [_job(check) for check in checked]
    lock = study.lock
    verified_rows = {check.row.trace: check.row.to_dict() for check in checked if check.usable}
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


def _job(check: JobCheck[Any]) -> dict[str, Any]:
    row = check.row.to_dict()
    keys = ("card_id", "method", "condition", "forecast_date", "seed", "status", "p_yes")
    more = ("p_options", "unresolved_mass", "calls", "tokens", "cost_usd", "wall_s", "error")
    return {
        **{k: row.get(k) for k in (*keys, *more, "trace")},
        "check": check.state,
        "check_note": check.note,
        "view": view_segments(row) if check.verified else None,
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


def study_scores(study: StudyFolder, checked: list[JobCheck[Any]], labels: Path) -> dict[str, Any]:
    """What ``worldsim score FOLDER --labels LABELS --compare FIRST:M ...`` reports (the first
    method of the study is the baseline of each paired comparison), over the traces that check
    out, with the study's tables per method, condition and date when every trace does."""
    from worldsim.scoring.analysis import ScoreOptions, score
    from worldsim.scoring.labels import load_labels
    from worldsim.scoring.report import to_json
    from worldsim.scoring.study_tables import study_tables

    heads = study.heads()
    usable = [check.row.to_dict() for check in checked if check.usable]
    traces = sorted(study.path / str(row["trace"]) for row in usable)
    methods = list(dict.fromkeys(check.row.method for check in checked))
    options = ScoreOptions(
        inputs=tuple(traces),
        labels=labels,
        compare=tuple((methods[0], m) for m in methods[1:]),
        split_versions=True,
        heads={t: heads[t] for t in traces},
    )
    doc = to_json(score(options))
    keep = ("metric", "n_cards", "n_units", "methods", "comparisons", "calibration", "coverage")
    flagged = sum(1 for check in checked if check.flagged)
    rows = [{**row, "trace": str((study.path / str(row["trace"])).resolve())} for row in usable]
    tables = None if flagged else _tables(study_tables(rows, load_labels(labels)))
    return {"labels": str(labels), **{k: doc[k] for k in keep}, "tables": tables}


def _tables(tables: StudyTables) -> dict[str, Any]:
    return {
        "by": {key: tables.by(key) for key in _GROUP},
        "dates": list(tables.dates),
        "accuracy_by_date": tables.accuracy_by_date(),
    }
