"""``worldsim run``: run a card (or resume a run) and write its traces."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worldsim.cli._app import (
    SignKeyOption,
    app,
    err_console,
    on_interrupt,
    out_console,
)
from worldsim.cli.models import preflight_routes
from worldsim.cli.settings import (
    MaxConnectionsOption,
    RoleModelOption,
    given_options,
    recorded_settings,
    run_config,
    typed_flag,
    with_model_options,
)
from worldsim.cli.stopped import going_on, replicates_left, runs_left, unfinished
from worldsim.domain import bounds
from worldsim.domain.errors import ConfigError
from worldsim.world.extraction import EXTRACTION_RULES

if TYPE_CHECKING:
    from rich.table import Table

    from worldsim.domain.config import RunConfig
    from worldsim.sim.settlement import RunResult
    from worldsim.trace.signing import Signer

# Commands import the engine, the models and the trace machinery when they run, so that
# `worldsim --help` and `worldsim roles` start without numpy, openai or aiosqlite.

__all__: list[str] = []


def _one_card(card: Path | None, extra: list[str]) -> Path | None:
    """The one card of ``run``; several cards or a folder are a study, said plainly."""
    if extra:
        raise ConfigError(
            f"run takes one card file, not {1 + len(extra)}; run each card separately"
        )
    if card is not None and card.is_dir():
        raise ConfigError(
            "run takes one card file, not a folder; run each card separately", file=card
        )
    return card


_RECORDED = (
    "policy", "seed", "ticks", "extraction", "method_label", "model", "role_model", "role",
    "replicates", "max_trace_mb",
)  # fmt: skip
_KEPT_BY_THE_TRACE = {"--resume": (*_RECORDED, "out", "force"), "--continue": _RECORDED}
"""The options ``--resume`` and ``--continue`` cannot honour: the card, policy, seed, ticks,
rule, method, routes and roles are the trace's (a resume also writes to the trace itself)."""


def _refuse_what_the_trace_keeps(ctx: typer.Context, mode: str) -> None:
    """Refuse, before anything is read or written, an option typed with ``mode`` that it would
    otherwise ignore."""
    typed = given_options(ctx)
    kept = [name for name in _KEPT_BY_THE_TRACE[mode] if name in typed]
    if not kept:
        return
    flags = {p.name: p.opts[0] for p in ctx.command.params if p.name is not None}
    raise ConfigError(
        f"{mode} keeps what the trace recorded: {', '.join(flags[n] for n in kept)} cannot "
        "be given with it (the cache, limits, budget, prices and leakage options can)",
        field=kept[0],
    )


def _resume(trace: Path, ctx: typer.Context, json_out: bool, signer: "Signer | None") -> None:
    """Continue the run in ``trace`` with the settings it recorded, and the options typed now
    on top (the routes always come from the trace)."""
    import anyio

    from worldsim.sim.resuming import resume_run

    recorded = recorded_settings(trace)  # none: resume_run says what is wrong with the trace
    options = given_options(ctx)
    models = run_config(options, base=recorded, source=trace).models if recorded else None
    with on_interrupt(lambda: unfinished(trace)), going_on(trace):
        result = anyio.run(lambda: resume_run(trace, models=models, signer=signer))
    if json_out:
        sys.stdout.write(json.dumps(result.summary()) + "\n")
        return
    out_console.print(_summary_table([result]))
    out_console.print(f"resumed and completed: {_anchor(result, signer)}", highlight=False)


def _continue(
    parent: Path, as_of: str | None, ctx: typer.Context, json_out: bool, signer: "Signer | None"
) -> None:
    """Carry the run in ``parent`` forward to ``as_of`` with the model settings it recorded,
    and the options typed now on top."""
    from worldsim.cli.continuing import continue_from_cli

    recorded = recorded_settings(parent)  # none: the continuation says what is wrong
    options = given_options(ctx)
    models = run_config(options, base=recorded, source=parent).models if recorded else None
    out = options.get("out")
    result = continue_from_cli(parent, as_of, out, models, bool(options.get("force")), signer)
    if json_out:
        sys.stdout.write(json.dumps(result.summary()) + "\n")
        return
    out_console.print(_summary_table([result]))
    out_console.print(f"continued to {as_of}: {_anchor(result, signer)}", highlight=False)


def _signer(sign_key: Path | None) -> "Signer | None":
    """The ``--sign-key`` key, loaded before any trace is touched (a bad key is exit 2)."""
    if sign_key is None:
        return None
    from worldsim.trace.signing import load_signer

    return load_signer(sign_key)


def _anchor(result: "RunResult", signer: "Signer | None") -> str:
    """``TRACE head HASH``: what to record to pin the trace (``verify --expect-head``)."""
    signed = f" · signed by key {signer.key_id}" if signer is not None else ""
    return f"{result.trace} · head {result.head}{signed}"


def _summary_table(results: "list[RunResult]") -> "Table":
    from rich.table import Table

    table = Table(title="worldsim run", show_lines=False)
    for col in ("seed", "p_yes", "unresolved", "timelines", "forks", "rejected", "wall s", "trace"):
        if col == "trace":
            table.add_column(col, overflow="fold", min_width=20)
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for r in results:
        if r.p_yes is not None:
            p = f"{r.p_yes:.4f}"
        else:
            p = " ".join(f"{k} {v:.3f}" for k, v in sorted((r.p_options or {}).items()))
        table.add_row(
            str(r.seed),
            p,
            f"{r.unresolved_mass:.4f}",
            str(r.timelines),
            str(r.forks),
            str(r.forks_rejected),
            f"{r.wall_s:.2f}",
            str(r.trace),
        )
    return table


# Further positional arguments are collected (not refused by typer) so that several cards get
# the one-line answer of `_one_card`.
@app.command(context_settings={"allow_extra_args": True})
@with_model_options
def run(
    ctx: typer.Context,
    card: Annotated[
        Path | None,
        typer.Argument(
            help="One scenario card file (YAML or JSON); omit with --config or --resume.",
            metavar="CARD",
        ),
    ] = None,
    policy: Annotated[
        str,
        typer.Option(
            metavar="NAME|FILE",
            help="Branch policy: a preset (no_branch, branching, adaptive, or one in ./policies)"
            " or a policy file.",
        ),
    ] = "branching",
    model: Annotated[
        str, typer.Option(metavar="ROUTE", help="Model route for every role (provider/model).")
    ] = "offline",
    seed: Annotated[int, typer.Option(min=0, help="Seed of the first run.")] = 0,
    replicates: Annotated[
        int,
        typer.Option(min=1, max=bounds.MAX_REPLICATES, help="Runs with seeds SEED..SEED+N-1."),
    ] = 1,
    ticks: Annotated[
        int | None,
        typer.Option(min=1, max=bounds.MAX_TICKS, help="Ticks (default: policy, else 8)."),
    ] = None,
    out: Annotated[Path, typer.Option(metavar="DIR", help="Folder for the traces.")] = Path(
        "traces"
    ),
    extraction: Annotated[
        str,
        typer.Option(
            metavar="|".join(EXTRACTION_RULES),
            help="How p_yes is read from the finished timelines.",
        ),
    ] = "path-ledger/1",
    method_label: Annotated[
        str | None, typer.Option(metavar="NAME", help="Method label (default: the policy name).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace existing traces of the same name.")] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per trace, nothing else.")
    ] = False,
    role_model: RoleModelOption = None,
    role: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME",
            help="Add a role to the run (repeatable): a tick role acts as its own agent on every "
            "timeline; an init, review or report role takes that phase. See `worldsim roles`.",
        ),
    ] = None,
    max_connections: MaxConnectionsOption = 8,
    max_trace_mb: Annotated[
        float,
        typer.Option(
            min=1.0,
            metavar="MB",
            help="Refuse to start a run whose estimated trace is larger (docs/limits.md).",
        ),
    ] = bounds.DEFAULT_MAX_TRACE_MB,
    resume: Annotated[
        Path | None,
        typer.Option(metavar="TRACE", help="Continue the run recorded in this trace."),
    ] = None,
    continue_from: Annotated[
        Path | None,
        typer.Option(
            "--continue",
            metavar="TRACE",
            help="Carry this finished run forward to --as-of: its timelines just before that "
            "date are re-weighted by the news published since its own date, then run on to the "
            "deadline (docs/concepts.md). Writes a new trace beside the parent (or in --out).",
        ),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="DATE",
            help="With --continue: the new date, an ISO date or datetime, or a study keyword "
            "(early, mid, late, near_resolution).",
        ),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="Run settings from a YAML file (a RunConfig); options typed on the command "
            "line override the file's values.",
        ),
    ] = None,
    sign_key: SignKeyOption = None,
    **model_options: Any,
) -> None:
    """Run a scenario card as a branching multiverse and write one trace per seed.

    With --resume TRACE, continue a run that crashed, was interrupted, hit its budget, could
    not write its trace (a full disk) or was stopped by a role that failed (once it is fixed):
    the card, policy, seed and routes come from the trace, and so do the other settings it
    recorded (budget, prices, cache, limits, leakage guard) unless an option given here
    replaces one; completed ticks are not run again and a model call the
    trace (or the response cache) holds an answer to is not asked again. The budget counts what
    the trace records as spent: a run stopped by its budget continues with a higher
    --max-cost-usd. An option that would change what the trace decides (--policy, --seed,
    --ticks, --model, --role and the like) is refused with --resume and --continue, not
    ignored. A trace that another run is writing is refused at once (exit 2).

    With --config FILE, the settings come from FILE (card, policy, seed, ticks, roles, models;
    relative paths are read from FILE's folder) and any option given here overrides them.

    A trace is named DIR/CARD__METHOD__sSEED.jsonl, with the model routes (when not offline),
    the added roles and the settings that differ from their defaults (ticks, extraction rule,
    condition, ...) before the seed: runs that differ never take each other's place.

    With --continue TRACE --as-of DATE, carry a finished run forward to DATE: its timelines as
    they stood just before DATE are re-weighted by the news the card's evidence holds between
    the run's date and DATE, then run on to the deadline under the same policy (no world is
    built again and no tick before DATE runs). The new trace names its parent.

    Each trace's head is printed at the end: record it to pin the trace (verify --expect-head).
    """
    card = _one_card(card, ctx.args)
    signer = _signer(sign_key)
    if as_of is not None and continue_from is None:
        raise ConfigError("--as-of takes --continue TRACE", field="as_of")
    if resume is not None or continue_from is not None:
        if card is not None or config_file is not None or (resume and continue_from):
            raise ConfigError(
                "give a card, --config, --resume TRACE or --continue TRACE, not two",
                field="continue" if continue_from is not None else "resume",
            )
        _refuse_what_the_trace_keeps(ctx, "--continue" if continue_from else "--resume")
        if continue_from is not None:
            _continue(continue_from, as_of, ctx, json_out, signer)
        else:
            assert resume is not None
            _resume(resume, ctx, json_out, signer)
        return
    if card is None and config_file is None:
        raise ConfigError("missing card (or --config FILE, or --resume TRACE)", field="card")
    configs = _replicates(ctx, card, config_file, replicates, max_trace_mb)
    preflight_routes(configs[0].models, model_options["preflight"])
    started = time.perf_counter()
    results = _run_each(configs, out, force, json_out, max_trace_mb, signer)
    if not json_out:
        _report(results, signer, time.perf_counter() - started)


def _replicates(
    ctx: typer.Context,
    card: Path | None,
    config_file: Path | None,
    replicates: int,
    max_trace_mb: float,
) -> "list[RunConfig]":
    """The run's settings, one per seed, checked before anything is written (unknown roles,
    bad routes, a run too large: exit 2)."""
    from worldsim.domain.config import load_run_config
    from worldsim.sim.session import prepare

    base = load_run_config(config_file) if config_file is not None else None
    typed = given_options(ctx)
    first = run_config(typed, card=card, base=base, source=config_file)
    try:
        prepare(first, max_trace_mb=max_trace_mb)
    except ConfigError as exc:
        raise _named_where_given(exc, typed, config_file) from None
    if first.seed + replicates - 1 > bounds.MAX_SEED:
        raise ConfigError(f"seeds run up to {bounds.MAX_SEED}", field="replicates")
    return [
        first.model_copy(update={"seed": s}) for s in range(first.seed, first.seed + replicates)
    ]


_ROLE_FIELDS = {
    "extra_roles": ("role", "--role", "extra_roles"),
    "--role-model": ("role_model", "--role-model", "models.role_models"),
}
"""A role setting `prepare` refuses (by the field it names): its option's name and flag, and
its field in a ``--config`` file."""


_CONFIG_FIELDS = {"--model": "models.model", "extraction": "extraction_rule"}
"""A setting `prepare` refuses by its option's name: its field in a ``--config`` file."""


def _named_where_given(
    exc: ConfigError, typed: Mapping[str, Any], config_file: Path | None
) -> ConfigError:
    """``exc`` naming where the refused setting came from: the option, when the value it names
    was typed, else (a role setting) the ``--config`` file and its field."""
    if exc.file is not None:
        return exc
    if exc.field not in _ROLE_FIELDS:
        flag = typed_flag(exc.field, typed)
        if flag is not None:
            return ConfigError(exc.message, field=flag)
        if config_file is not None and exc.field in _CONFIG_FIELDS:
            return ConfigError(exc.message, file=config_file, field=_CONFIG_FIELDS[exc.field])
        return exc
    option, flag, in_the_file = _ROLE_FIELDS[exc.field]
    if config_file is None or any(f"'{value}'" in exc.message for value in typed.get(option) or ()):
        return ConfigError(exc.message, field=flag)
    return ConfigError(exc.message, file=config_file, field=in_the_file)


def _run_each(
    configs: "list[RunConfig]",
    out: Path,
    force: bool,
    json_out: bool,
    max_trace_mb: float,
    signer: "Signer | None",
) -> "list[RunResult]":
    """Run each seed in turn, once none would replace a trace (unless ``force``), with a
    progress display on a terminal (or one JSON line a run with --json); the runs share their
    HTTP clients, which cost more to make than many calls."""
    import anyio

    from worldsim.cli.progress import RunProgress, run_progress
    from worldsim.models.pool import HttpClients, Shared
    from worldsim.sim.plan import trace_name
    from worldsim.sim.session import check_trace_target, run_budget, run_card

    for cfg in configs:
        check_trace_target(out / trace_name(cfg), force)

    results: list[RunResult] = []
    show = not json_out and err_console.is_terminal

    def left() -> str:
        return runs_left(out, configs, len(results))

    async def go() -> None:
        async with HttpClients() as clients:
            # the cap is the command's: every replicate spends from one budget
            shared = Shared(budget=run_budget(configs[0].models), clients=clients)
            with run_progress(err_console, show=show) as progress:
                for cfg in configs:
                    label = f"{cfg.card.id} seed {cfg.seed}"
                    then = replicates_left(configs, len(results))
                    with going_on(out / trace_name(cfg), then):
                        result = await run_card(
                            cfg,
                            out,
                            overwrite=force,
                            observer=RunProgress(progress, label, cfg.effective_ticks),
                            max_trace_mb=max_trace_mb,
                            signer=signer,
                            shared=shared,
                        )
                    results.append(result)
                    if json_out:
                        sys.stdout.write(json.dumps(result.summary()) + "\n")
                        sys.stdout.flush()

    with on_interrupt(left):
        anyio.run(go)
    return results


def _report(results: "list[RunResult]", signer: "Signer | None", wall_s: float) -> None:
    """The runs' table, each trace's anchor, the replicates' spread and the wall time."""
    import statistics

    out_console.print(_summary_table(results))
    for result in results:
        out_console.print(_anchor(result, signer), highlight=False)
    ps = [r.p_yes for r in results if r.p_yes is not None]
    if len(ps) > 1:
        out_console.print(
            f"p_yes mean {statistics.fmean(ps):.4f} · sd {statistics.stdev(ps):.4f} "
            f"over {len(ps)} replicates"
        )
    out_console.print(f"wall time {wall_s:.2f} s")
