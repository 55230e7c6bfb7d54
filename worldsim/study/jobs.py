"""A study's jobs: every (card, method, forecast date, seed), with its run config and trace path.

A job's trace is ``traces/<card>/<method>/<date>__s<seed>.jsonl`` under the study folder, where
``<date>`` is the manifest's keyword (``card``, ``mid``, ...) or the ISO date it gave.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from worldsim.domain.cards import utc_iso
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import ConfigError
from worldsim.domain.interventions import check_against
from worldsim.study.dates import forecast_date
from worldsim.study.manifest import Study

__all__ = ["Job", "expand_jobs"]


@dataclass(frozen=True, slots=True)
class Job:
    """One run of a study."""

    card_id: str
    method: str
    date_name: str
    when: datetime
    seed: int
    config: RunConfig
    previous: Path | None = None
    """A rolling method's job after its first date: the trace (relative to the study folder)
    of the job it continues, which must be complete before it starts."""

    @property
    def trace(self) -> Path:
        """The trace's path relative to the study folder."""
        stem = self.date_name.replace(":", "").replace(" ", "T")
        return Path("traces", self.card_id, self.method, f"{stem}__s{self.seed}.jsonl")

    @property
    def condition(self) -> str:
        return "direct" if self.config.kind == "direct" else self.config.condition


def expand_jobs(study: Study, resolved: Mapping[str, datetime | None] | None = None) -> list[Job]:
    """Every job of ``study`` in card, method, date, seed order. ``resolved`` gives a card's
    resolution date (a label's ``resolved_at``) for the forecast window and ``near_resolution``.
    A date outside a card's window is a ConfigError naming the manifest's field."""
    resolved = resolved or {}
    jobs: list[Job] = []
    for card, card_path in study.cards:
        ends = resolved.get(card.id)
        dates: list[tuple[str, datetime]] = []
        for i, name in enumerate(study.manifest.forecast_dates):
            try:
                when = forecast_date(card, name, ends)
            except ValueError as exc:
                raise ConfigError(str(exc), file=study.path, field=f"forecast_dates.{i}") from None
            same = next((other for other, moment in dates if moment == when), None)
            if same is not None:  # the same jobs twice, counted as two units
                raise ConfigError(
                    f"forecast date {name} of card '{card.id}' is {same}'s moment "
                    f"({utc_iso(when)}): give it once",
                    file=study.path,
                    field=f"forecast_dates.{i}",
                )
            dates.append((name, when))
        for j, method in enumerate(study.methods):
            base = method.config(card, card_path)
            if base.condition == "near_resolution" and ends is not None:
                base = base.model_copy(update={"resolves_at": ends})
            # a rolling method chains its dates in time order: each continues the one before
            chain = sorted(dates, key=lambda d: d[1]) if method.rolling else []
            before = {later[0]: earlier[0] for earlier, later in itertools.pairwise(chain)}
            for name, when in dates:
                moved = None if when == card.as_of else when
                if not method.rolling:  # a rolling link's earlier dates ran in the one before
                    _check_interventions(study, j, base, card.id, name, when)
                dated = base.model_copy(update={"forecast_date": moved})
                for seed in study.manifest.seeds:
                    config = dated.model_copy(update={"seed": seed})
                    job = Job(card.id, method.label, name, when, seed, config)
                    if name in before:
                        first = Job(card.id, method.label, before[name], when, seed, config)
                        job = replace(job, previous=first.trace)
                    jobs.append(job)
    return jobs


def _check_interventions(
    study: Study, index: int, config: RunConfig, card_id: str, name: str, when: datetime
) -> None:
    """Refuse an intervention a job's run from its forecast date cannot apply, as a single run
    from that date refuses it (one dated before it would never be applied)."""
    try:
        check_against(config.interventions, config.card, when)
    except ConfigError as exc:
        part = "run" if config.kind == "multiverse" else "forecast"
        raise ConfigError(
            f"{exc.message} (forecast date {name} of card '{card_id}')",
            file=study.path,
            field=f"methods.{index}.{part}.{exc.field}",
        ) from None
