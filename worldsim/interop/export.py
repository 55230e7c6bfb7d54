"""Forecasts out: a study's forecasts as a ForecastBench submission or a flat table.

``forecastbench`` writes the forecast file ForecastBench's reader accepts
(`worldsim.interop.forecast_file` ports its rules): ``organization``, ``model``,
``model_organization``, ``question_set`` (the round's question set's name, which holds its due
date), ``forecast_due_date`` (the set's) and ``forecasts``: one per row of the round's question
set — each market question, each data-set question at each resolution date — with ``id``,
``source``, ``direction`` (null: a single question), ``forecast``, ``resolution_date`` (null
for a market) and ``reasoning``, which says how the number was made. One method is exported;
its seeds' p_yes (read from their traces) are combined per card (``mean``, ``median`` or
``logit_mean``) and rounded to 6 decimals. A question the study did not forecast — no card, or
no complete job at the card's own date — gets the **fallback**: its prior as `cards import`
writes it, a market's freeze value (0 or 1 held at 0.001 or 0.999) rounded to 6 decimals, else
0.5, and is listed. Only the jobs of
cards of the set's round (the due date in their provenance) answer it. ``csv`` writes the same rows
as a table; without a question set, the study's cards only. `Submission` is the file's schema;
the published JSON schema is ``docs/forecastbench-submission.schema.json``.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsim.domain.errors import ConfigError, TraceIncomplete
from worldsim.domain.files import first_error, write_files
from worldsim.domain.forecastbench import (
    MARKET_SOURCES,
    card_id_for,
    freeze_value,
    is_combination,
    load_question_set,
    round_key,
)
from worldsim.interop.question_set import Round, held_prior, round_of
from worldsim.scoring.aggregates import Aggregate
from worldsim.scoring.aggregates import aggregate as combine
from worldsim.study.folder import open_study
from worldsim.trace.verify import verified_lines

__all__ = [
    "Aggregate",
    "Exported",
    "JobForecast",
    "Submission",
    "export_study",
    "study_forecasts",
    "submission_schema",
]


class SubmittedForecast(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    source: str = Field(min_length=1)
    direction: list[int] | None = None
    forecast: float = Field(ge=0.0, le=1.0)
    resolution_date: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    reasoning: str | None = None


class Submission(BaseModel):
    """A ForecastBench forecast set."""

    model_config = ConfigDict(extra="forbid")

    organization: str = Field(min_length=1)
    model: str = Field(min_length=1)
    model_organization: str = Field(min_length=1)
    question_set: str = Field(min_length=1, pattern=r"^\d{4}-\d{2}-\d{2}")
    forecast_due_date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    forecasts: list[SubmittedForecast]


@dataclass(frozen=True, slots=True)
class JobForecast:
    """One complete binary job of a study at its card's own date, as its trace tells it."""

    card_id: str
    seed: int
    p_yes: float
    rule: str
    card: dict[str, Any]
    summary: str | None


@dataclass(frozen=True, slots=True)
class Exported:
    """What was written: the file, how many rows, those given the fallback (each with why),
    and how many of the study's jobs were left out; of those, how many are of cards of
    another round than the question set's, by round."""

    path: Path
    questions: int
    fallbacks: tuple[str, ...]
    left_out: int
    other_rounds: tuple[tuple[str, int], ...] = ()


def study_forecasts(folder: Path, method: str) -> tuple[list[JobForecast], int]:
    """``method``'s complete binary jobs of the study in ``folder`` at the card's own date,
    each read from its trace, verified with the head the study's job log recorded (the
    forecast, the rule, the card, the report), and how many of the method's jobs are not such.
    The one place export reads a study: a trace replaced since the study ran is refused as
    ``verify --expect-head`` refuses it, and one that ran another job than its plan's (exit 1)."""
    study = open_study(folder)
    if study is None:
        raise ConfigError("not a study folder (no experiment.lock.json)", file=folder)
    methods = sorted({str(plan["method"]) for plan in study.plans})
    if method not in methods:
        raise ConfigError(
            f"no method '{method}' in this study (it has {', '.join(methods)})", field="--method"
        )
    study.refuse_other_jobs()
    heads = study.heads()
    jobs: list[JobForecast] = []
    left_out = 0
    for plan in study.plans:
        if plan["method"] != method:
            continue
        trace = study.path / str(plan["trace"])
        usable = trace in heads and plan["kind"] == "binary" and plan["forecast_date"] == "card"
        job = _job(trace, int(plan["seed"]), heads[trace]) if usable else None
        if job is None:
            left_out += 1
        else:
            jobs.append(job)
    return jobs, left_out


def _job(trace: Path, seed: int, head: str) -> JobForecast | None:
    card: dict[str, Any] = {}
    summary: str | None = None
    p_yes: float | None = None
    rule = ""
    try:
        for line in verified_lines(trace, expect_head=head):
            if line.type == "run_started":
                card = dict(line.fields.get("card") or {})
            elif line.type == "extraction":
                p_yes, rule = line.fields.get("p_yes"), str(line.fields.get("rule") or "")
            elif line.type == "report":
                summary = line.fields.get("summary") or None
    except TraceIncomplete:
        return None  # sound, but no result: left out and counted
    if p_yes is None or not card.get("id"):
        return None
    return JobForecast(str(card["id"]), seed, float(p_yes), rule, card, summary)


def export_study(
    folder: Path,
    out: Path,
    *,
    fmt: Literal["forecastbench", "csv"],
    method: str,
    organization: str,
    model: str,
    model_organization: str,
    question_set: Path | None = None,
    aggregate: Aggregate = "mean",
) -> Exported:
    """Write ``method``'s forecasts of the study in ``folder`` to ``out`` (see the module)."""
    if fmt == "forecastbench" and question_set is None:
        raise ConfigError(
            "a ForecastBench submission answers a round: give its question set file",
            field="--question-set",
        )
    jobs, left_out = study_forecasts(folder, method)
    if not jobs:
        raise ConfigError(
            f"method '{method}' has no complete binary forecast at the card's date to export",
            field="--method",
        )
    others: dict[str, int] = {}
    doc: dict[str, Any] = {}
    if question_set is not None:
        question_set, doc = load_question_set(question_set, ConfigError)
        this = round_of(doc, question_set.name)
        jobs, others = _of_round(jobs, this, question_set)
        left_out += sum(others.values())
    by_card: dict[str, list[JobForecast]] = defaultdict(list)
    for job in jobs:
        by_card[job.card_id].append(job)
    fallbacks: list[str] = []
    if question_set is None:
        rows = [_from_card(group, method, aggregate) for _, group in sorted(by_card.items())]
        name = due = ""
    else:
        rows, fallbacks, name, due, outside = _round_rows(doc, this, by_card, method, aggregate)
        left_out += outside
    if fmt == "forecastbench":
        try:
            submission = Submission(
                organization=organization,
                model=model,
                model_organization=model_organization,
                question_set=name,
                forecast_due_date=due,
                forecasts=rows,
            )
        except ValidationError as exc:
            field, message = first_error(exc)
            raise ConfigError(message, field=f"--{field.replace('_', '-')}") from None
        content = submission.model_dump_json(indent=1) + "\n"
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(SubmittedForecast.model_fields))
        writer.writeheader()
        for f in rows:
            writer.writerow(f.model_dump())
        content = buffer.getvalue()
    write_files({out: content.encode("utf-8")})
    return Exported(out, len(rows), tuple(fallbacks), left_out, tuple(sorted(others.items())))


def _of_round(
    jobs: list[JobForecast], this: Round, path: Path
) -> tuple[list[JobForecast], dict[str, int]]:
    """The jobs whose card `cards import` made of the round ``this`` (its forecast due date:
    a round's human and llm sets are one round; its name when the set gives no date), and how
    many are of each other round. A job of another round never answers this one's rows, even
    where a question id recurs; when no job is of this round, the question set is refused."""
    mine: list[JobForecast] = []
    others: Counter[str] = Counter()
    for job in jobs:
        provenance = job.card.get("provenance") or {}
        name, due = provenance.get("question_set"), provenance.get("forecast_due_date")
        if round_key(due, name) == round_key(this.due, this.name):
            mine.append(job)
        else:
            others[_round_name(name, due)] += 1
    if not mine:
        raise ConfigError(
            "none of the study's jobs is of this question set's round, "
            f"{_round_name(this.name, this.due)}: its cards are of {', '.join(sorted(others))}",
            file=path,
            field="--question-set",
        )
    return mine, dict(others)


def _round_name(name: object, due: object) -> str:
    if not name:
        return "no ForecastBench round"
    return f"{name} (due {due})" if due else str(name)


def _round_rows(
    doc: dict[str, Any],
    this: Round,
    by_card: dict[str, list[JobForecast]],
    method: str,
    how: Aggregate,
) -> tuple[list[SubmittedForecast], list[str], str, str, int]:
    """One row per row of the round ``this``'s question set ``doc``; the fallbacks listed; the
    round's name and due date; how many of the study's jobs answer no row of it."""
    rows: list[SubmittedForecast] = []
    fallbacks: list[str] = []
    used: set[str] = set()
    for q in doc["questions"]:
        if not isinstance(q, dict) or is_combination(q):
            continue
        source, qid = str(q.get("source") or "").lower(), str(q.get("id") or "")
        market = source in MARKET_SOURCES
        dates = [None] if market else [str(d)[:10] for d in q.get("resolution_dates") or ()]
        for day in dates:
            card_id = card_id_for(source, qid, day)
            group = by_card.get(card_id)
            if group:
                used.add(card_id)
                rows.append(_from_card(group, method, how, day))
                continue
            value, why = _fallback(q)
            at = f" at {day}" if day else ""
            fallbacks.append(f"{source} {qid}{at}: {value:g} ({why})")
            rows.append(
                SubmittedForecast(
                    id=qid,
                    source=source,
                    forecast=value,
                    resolution_date=day,
                    reasoning=f"worldsim has no forecast of this question from method "
                    f"'{method}' (no card, or no complete job at the card's date); this is the "
                    f"fallback: {why}.",
                )
            )
    outside = sum(len(g) for c, g in by_card.items() if c not in used)
    return rows, fallbacks, this.name, this.due or "", outside


def _fallback(q: dict[str, Any]) -> tuple[float, str]:
    """A question's prior as `cards import` writes it: a market's freeze value, else 0.5."""
    value = freeze_value(q)
    if value is None:
        return 0.5, "0.5"
    when = q.get("freeze_datetime")
    at = f" at {str(when)[:10]}" if isinstance(when, str) and when.strip() else ""
    return round(held_prior(value), 6), f"the market's freeze value{at}"


def _from_card(
    group: list[JobForecast], method: str, how: Aggregate, day: str | None = None
) -> SubmittedForecast:
    card = group[0].card
    provenance = card.get("provenance") or {}
    source = str(provenance.get("source") or "worldsim")
    values = [j.p_yes for j in sorted(group, key=lambda j: j.seed)]
    forecast = round(combine(values, how), 6)
    rules = ", ".join(sorted({j.rule for j in group}))
    shown = ", ".join(f"{v:.4g}" for v in values[:10]) + (", ..." if len(values) > 10 else "")
    word = {"mean": "mean", "median": "median", "logit_mean": "logit-mean"}[how]
    first = min(group, key=lambda j: j.seed)
    reasoning = (
        f"The {word} of {len(values)} seed(s)' p_yes ({shown}), rounded to 6 decimals, from "
        f"worldsim method '{method}', extraction rule {rules}."
    )
    if first.summary:
        reasoning += f" Seed {first.seed}'s report: {first.summary}"
    if day is None and source not in MARKET_SOURCES:
        day = str(provenance.get("resolution_date") or card.get("deadline") or "")[:10] or None
    return SubmittedForecast(
        id=str(provenance.get("question_id") or card.get("id")),
        source=source,
        forecast=forecast,
        resolution_date=None if source in MARKET_SOURCES else day,
        reasoning=reasoning,
    )


def submission_schema() -> str:
    """The published JSON schema of a submission (docs/forecastbench-submission.schema.json)."""
    return json.dumps(Submission.model_json_schema(), indent=2, sort_keys=True) + "\n"
