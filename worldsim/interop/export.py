"""Forecasts out: a study's predictions as a ForecastBench submission or a flat table.

``forecastbench`` writes the forecast-set JSON a ForecastBench submission takes:
``organization``, ``model``, ``question_set``, ``forecast_due_date`` and ``forecasts``, one per
question: ``id`` and ``source`` (from the card's provenance, else the card id and
``worldsim``), ``forecast`` (p_yes), ``resolution_date`` (the card's deadline for a data-set
question, ``null`` for a market question) and ``reasoning`` (the run's report summary). One
method is exported; its seeds are aggregated per card (``mean``, ``median`` or
``logit_mean``, p clipped to [0.001, 0.999] before the logit). Only complete binary jobs at the
study's ``card`` forecast date count; the others are left out and counted. ``csv`` writes one
row per exported question with the same fields. `Submission` is the file's schema; the
published JSON schema is ``docs/forecastbench-submission.schema.json``.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsim.domain.errors import ConfigError
from worldsim.domain.files import first_error, write_files
from worldsim.scoring.aggregates import Aggregate
from worldsim.scoring.aggregates import aggregate as combine
from worldsim.study.folder import open_study, verified_jobs
from worldsim.trace.verify import verified_lines

__all__ = ["Aggregate", "Exported", "Submission", "export_study", "submission_schema"]

MARKET_SOURCES = frozenset({"manifold", "metaculus", "polymarket", "infer"})


class SubmittedForecast(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    source: str = Field(min_length=1)
    forecast: float = Field(ge=0.0, le=1.0)
    resolution_date: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    reasoning: str | None = None


class Submission(BaseModel):
    """A ForecastBench forecast set."""

    model_config = ConfigDict(extra="forbid")

    organization: str = Field(min_length=1)
    model: str = Field(min_length=1)
    question_set: str = Field(min_length=1)
    forecast_due_date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    forecasts: list[SubmittedForecast]


@dataclass(frozen=True, slots=True)
class Exported:
    """What was written: the file, how many questions, and how many jobs were left out."""

    path: Path
    questions: int
    left_out: int


def _card_and_report(trace: Path) -> tuple[dict[str, Any], str | None]:
    card: dict[str, Any] = {}
    summary: str | None = None
    for line in verified_lines(trace):
        if line.type == "run_started":
            card = dict(line.fields.get("card") or {})
        elif line.type == "report":
            summary = line.fields.get("summary") or None
    return card, summary


def export_study(
    folder: Path,
    out: Path,
    *,
    fmt: Literal["forecastbench", "csv"],
    method: str,
    organization: str,
    model: str,
    question_set: str | None = None,
    forecast_due_date: str | None = None,
    aggregate: Aggregate = "mean",
) -> Exported:
    """Write ``method``'s forecasts of the study in ``folder`` to ``out`` (see the module); every
    number comes from a job's verified trace, with the head its job log recorded."""
    study = open_study(folder)
    if study is None:
        raise ConfigError("not a study folder (no experiment.lock.json)", file=folder)
    jobs = verified_jobs(study)
    rows = [job.row.to_dict() for job in jobs]
    methods = sorted({str(r.get("method")) for r in rows})
    if method not in methods:
        raise ConfigError(
            f"no method '{method}' in this study (it has {', '.join(methods)})", field="--method"
        )
    by_card: dict[str, list[dict[str, Any]]] = defaultdict(list)
    left_out = 0
    for row in rows:
        if row.get("method") != method:
            continue
        usable = (
            row.get("status") == "complete"
            and isinstance(row.get("p_yes"), int | float)
            and row.get("forecast_date") == "card"
        )
        if usable:
            by_card[str(row["card_id"])].append(row)
        else:
            left_out += 1
    forecasts: list[SubmittedForecast] = []
    as_ofs: list[str] = []
    for card_id in sorted(by_card):
        group = by_card[card_id]
        card, reasoning = _card_and_report(folder / str(group[0]["trace"]))
        provenance = card.get("provenance") or {}
        source = provenance.get("source") or "worldsim"
        as_ofs.append(str(card.get("as_of", ""))[:10])
        forecasts.append(
            SubmittedForecast(
                id=str(provenance.get("question_id") or card_id),
                source=str(source),
                forecast=round(combine([float(r["p_yes"]) for r in group], aggregate), 6),
                resolution_date=None
                if source in MARKET_SOURCES
                else str(card.get("deadline", ""))[:10] or None,
                reasoning=reasoning,
            )
        )
    if not forecasts:
        raise ConfigError(
            f"method '{method}' has no complete binary forecast at the card's date to export",
            field="--method",
        )
    try:
        submission = Submission(
            organization=organization,
            model=model,
            question_set=question_set or folder.name,
            forecast_due_date=forecast_due_date or min(as_ofs),
            forecasts=forecasts,
        )
    except ValidationError as exc:
        field, message = first_error(exc)
        raise ConfigError(message, field=f"--{field.replace('_', '-')}") from None
    if fmt == "forecastbench":
        content = submission.model_dump_json(indent=1) + "\n"
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(SubmittedForecast.model_fields))
        writer.writeheader()
        for f in submission.forecasts:
            writer.writerow(f.model_dump())
        content = buffer.getvalue()
    write_files({out: content.encode("utf-8")})
    return Exported(out, len(forecasts), left_out)


def submission_schema() -> str:
    """The published JSON schema of a submission (docs/forecastbench-submission.schema.json)."""
    return json.dumps(Submission.model_json_schema(), indent=2, sort_keys=True) + "\n"
