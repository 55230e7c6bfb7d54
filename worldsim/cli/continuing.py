"""``worldsim run --continue TRACE --as-of DATE``: carry a finished run forward (see
:mod:`worldsim.sim.continuation`)."""

# No `from __future__ import annotations`: as the other command modules (typer reads their
# signatures at start-up).

from pathlib import Path
from typing import TYPE_CHECKING

from worldsim.cli._app import on_budget, on_interrupt
from worldsim.cli.stopped import on_role_failure, resume_with_more, unfinished
from worldsim.domain.errors import ConfigError

if TYPE_CHECKING:
    from datetime import datetime

    from worldsim.domain.config import ModelConfig
    from worldsim.sim.settlement import RunResult
    from worldsim.trace.signing import Signer

__all__ = ["continue_from_cli"]


def continue_from_cli(
    parent: Path,
    as_of: str | None,
    out: Path | None,
    models: "ModelConfig | None",
    force: bool,
    signer: "Signer | None",
) -> "RunResult":
    """``run --continue PARENT --as-of DATE``: the continued run's one call into the library."""
    import anyio

    from worldsim.sim.continuation import continue_run, continued_name
    from worldsim.sim.resume import holds_world

    if as_of is None:
        raise ConfigError("--continue needs --as-of DATE", field="as_of")
    when = _continue_date(parent, as_of)
    trace = (out if out is not None else parent.parent) / continued_name(parent.name, when)
    again = f"worldsim run --continue {parent} --as-of {as_of} --force"

    def left() -> str:
        if holds_world(trace):
            return unfinished(trace)
        return f"{trace} stopped before its news was weighed; `{again}` starts it again"

    def then() -> str:
        if holds_world(trace):
            return resume_with_more(trace)
        return f": `{again} --max-cost-usd MORE` (it stopped before its news was weighed)"

    with on_interrupt(left), on_budget(then), on_role_failure(trace):
        return anyio.run(
            lambda: continue_run(parent, when, out, models=models, overwrite=force, signer=signer)
        )


def _continue_date(parent: Path, name: str) -> "datetime":
    """The moment ``--as-of`` names on the parent's card: an ISO date or datetime, or a study
    keyword (`worldsim.study.dates`)."""
    from worldsim.domain.config import RunConfig
    from worldsim.domain.paths import missing_file
    from worldsim.study.dates import forecast_date
    from worldsim.trace.reader import iter_trace

    if not parent.is_file():
        raise missing_file(parent, "trace", field="continue")
    first = next(iter_trace(parent), None)
    config = getattr(first.data, "config", None) if first is not None else None
    if first is None or first.type != "run_started" or not config:
        raise ConfigError("not a run's trace: it does not start with run_started", file=parent)
    card = RunConfig.from_dict(config).card
    try:
        return forecast_date(card, name)
    except ValueError as exc:
        raise ConfigError(str(exc), field="as_of") from None
