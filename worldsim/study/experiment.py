"""The library's entry point to studies: ``Experiment.from_yaml(path).run(out)``.

A notebook needs no command line::

    study = worldsim.Experiment.from_yaml("scenarios/studies/demo-study.yaml")
    rows = study.run_sync("studies/demo")
    [(r.card_id, r.method, r.forecast_date, r.seed, r.p_yes) for r in rows]
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Unpack

import anyio

from worldsim.study.jobs import Job, expand_jobs
from worldsim.study.manifest import Study, load_study
from worldsim.study.outputs import PredictionRow
from worldsim.study.runner import StudyOptions, resolution_dates, run_study

__all__ = ["Experiment"]


class Experiment:
    """A validated study; :meth:`run` (async) or :meth:`run_sync` runs what is not done yet
    into a folder and returns every job's row, in job order."""

    def __init__(self, study: Study, *, environ: Mapping[str, str] | None = None) -> None:
        self.study = study
        self.environ = environ

    @classmethod
    def from_yaml(cls, path: str | Path, *, environ: Mapping[str, str] | None = None) -> Experiment:
        """Read and validate a manifest (a ConfigError names the field); ``environ`` replaces
        the environment for the routes' base URLs and keys."""
        return cls(load_study(path, environ=environ), environ=environ)

    @property
    def name(self) -> str:
        return self.study.name

    def jobs(self, labels: Path | None = None) -> list[Job]:
        """Every job, in the order the rows come back."""
        cards = [card for card, _ in self.study.cards]
        return expand_jobs(self.study, resolution_dates(labels, cards) if labels else None)

    async def run(self, out: str | Path, **options: Unpack[StudyOptions]) -> list[PredictionRow]:
        """Run what is not done yet into ``out``, with ``options`` as `run_study` takes them;
        ``executor`` decides where the jobs run (default: in this process;
        `worldsim.study.ray_executor.RayExecutor` on Ray)."""
        result = await run_study(self.study, out, environ=self.environ, **options)
        return list(result.rows)

    def run_sync(self, out: str | Path, **options: Unpack[StudyOptions]) -> list[PredictionRow]:
        """:meth:`run` for code that is not async (a script, a notebook without a loop)."""
        return anyio.run(lambda: self.run(out, **options))
