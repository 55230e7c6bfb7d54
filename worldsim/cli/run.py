"""``worldsim run``, ``replay``, ``verify`` and ``roles``: the engine's commands."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worldsim.cli._app import app, err_console, escape, out_console
from worldsim.domain.contracts import lineage
from worldsim.domain.errors import ConfigError, TraceError
from worldsim.world.extraction import EXTRACTION_RULES

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table

    from worldsim.domain.config import ModelConfig, RunConfig
    from worldsim.sim.settlement import RunResult
    from worldsim.trace.reader import Trace
    from worldsim.trace.replay import TickStep

# Commands import the engine, the models and the trace machinery when they run, so that
# `worldsim --help` and `worldsim roles` start without numpy, openai or aiosqlite.

__all__: list[str] = []


class _Progress:
    """Turns engine events into a live rich display on standard error."""

    def __init__(self, progress: "Progress", label: str, ticks: int) -> None:
        self.progress = progress
        self.task = progress.add_task(label, total=ticks, status="")
        self.ticks = ticks
        self.timelines = 0
        self.forks = 0
        self.rejected = 0
        self.tick_steps = 0

    def __call__(self, event: str, payload: Any) -> None:
        if event == "timeline_started":
            self.timelines += 1
            self.progress.update(self.task, total=self.ticks * self.timelines)
        elif event == "fork":
            self.forks += 1
        elif event == "fork_rejected":
            self.rejected += 1
        elif event == "tick_committed":
            self.tick_steps += 1
            self.progress.update(self.task, completed=self.tick_steps)
        elif event == "timeline_ended":
            # a timeline that ends early gives back its unrun ticks
            done = self.tick_steps
            self.progress.update(self.task, completed=done)
        self.progress.update(
            self.task,
            status=f"timelines {self.timelines} · forks {self.forks} · rejected {self.rejected}",
        )


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


def _resume(trace: Path, models: "ModelConfig", json_out: bool) -> None:
    import anyio

    from worldsim.sim.session import resume_run

    result = anyio.run(lambda: resume_run(trace, models=models))
    if json_out:
        sys.stdout.write(json.dumps(result.summary()) + "\n")
        return
    out_console.print(_summary_table([result]))
    out_console.print(f"resumed and completed: {result.trace}", highlight=False)


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


_RUN_FLAGS = {
    "policy": "policy",
    "seed": "seed",
    "ticks": "ticks",
    "extraction": "extraction_rule",
    "method_label": "method",
}
_MODEL_FLAGS = {
    "model": "model",
    "role_model": "role_models",
    "max_connections": "max_connections",
    "cache": "cache",
    "cache_path": "cache_path",
    "replay_strict": "replay_strict",
    "max_cost_usd": "max_cost_usd",
    "prices": "prices",
    "forbidden_strings": "forbidden_strings",
    "leakage": "leakage",
}


def _given(ctx: typer.Context) -> set[str]:
    """The options the user typed (not their defaults)."""
    given: set[str] = set()
    for name in ctx.params:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name not in {"DEFAULT", "DEFAULT_MAP"}:
            given.add(name)
    return given


def _run_config(ctx: typer.Context, config_file: Path | None, card: Path | None) -> "RunConfig":
    """The run's settings: the config file if given, with every option typed on the command
    line taking precedence over the file's value."""
    from worldsim.domain.config import RunConfig, load_run_config

    given = _given(ctx) if config_file is not None else set(ctx.params)
    params = ctx.params
    data = load_run_config(config_file) if config_file is not None else {}
    models = dict(data.get("models") or {})
    for flag, name in _RUN_FLAGS.items():
        if flag in given:
            data[name] = params[flag]
    for flag, name in _MODEL_FLAGS.items():
        if flag in given:
            models[name] = params[flag] if flag != "role_model" else tuple(params[flag] or ())
    data["models"] = models
    if card is not None:
        data["card"] = str(card)
    data["extra_roles"] = (*data.get("extra_roles", ()), *(params["role"] or ()))
    try:
        config = RunConfig.from_dict(data)
    except ConfigError as exc:
        if config_file is None or exc.file is not None:
            raise
        raise ConfigError(exc.message, file=config_file, field=exc.field) from None
    roles = (*config.card.roles, *config.policy.roles, *config.extra_roles)
    return config.model_copy(update={"extra_roles": tuple(dict.fromkeys(roles))})


# Further positional arguments are collected (not refused by typer) so that several cards get
# the one-line answer of `_one_card`.
@app.command(context_settings={"allow_extra_args": True})
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
    replicates: Annotated[int, typer.Option(min=1, help="Runs with seeds SEED..SEED+N-1.")] = 1,
    ticks: Annotated[
        int | None, typer.Option(min=1, max=10_000, help="Ticks (default: policy, else 8).")
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
    role_model: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ROLE=ROUTE",
            help="The route of one role (repeatable), e.g. cohort=openai/gpt-4o-mini.",
        ),
    ] = None,
    role: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME",
            help="Add a role to the run (repeatable): a tick role acts as its own agent on every "
            "timeline; an init, review or report role takes that phase. See `worldsim roles`.",
        ),
    ] = None,
    max_connections: Annotated[
        int, typer.Option(min=1, help="Concurrent requests per route, shared by all timelines.")
    ] = 8,
    cache: Annotated[
        str, typer.Option(metavar="use|refresh|off", help="Response cache: use, refresh or off.")
    ] = "use",
    cache_path: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Cache file (default OUT/.cache/responses.sqlite)."),
    ] = None,
    replay_strict: Annotated[
        bool, typer.Option(help="A cache miss is an error: replay, call no model.")
    ] = False,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(min=0.0, metavar="USD", help="Stop cleanly at this spend; resumable."),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Price table YAML overriding the shipped one."),
    ] = None,
    forbidden_strings: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Strings that must never appear in a prompt or reply."),
    ] = None,
    leakage: Annotated[
        str,
        typer.Option(metavar="record|fail", help="On a forbidden string: record it, or fail."),
    ] = "record",
    resume: Annotated[
        Path | None,
        typer.Option(metavar="TRACE", help="Continue the run recorded in this trace."),
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
) -> None:
    """Run a scenario card as a branching multiverse and write one trace per seed.

    With --resume TRACE, continue a run that crashed, was interrupted or hit its budget: the
    card, policy, seed and routes come from the trace; completed ticks are not run again and
    completed model calls come from the response cache.

    With --config FILE, the settings come from FILE (card, policy, seed, ticks, roles, models;
    relative paths are read from FILE's folder) and any option given here overrides them.
    """
    import statistics

    import anyio
    from pydantic import ValidationError

    from worldsim.domain.config import ModelConfig
    from worldsim.domain.files import first_error
    from worldsim.sim.plan import role_plan, route_table
    from worldsim.sim.session import run_card
    from worldsim.sim.settlement import trace_name

    card = _one_card(card, ctx.args)
    if resume is not None:
        if card is not None or config_file is not None:
            raise ConfigError("give a card, --config or --resume TRACE, not two", field="resume")
        flags = {name: ctx.params[flag] for flag, name in _MODEL_FLAGS.items()}
        try:
            models = ModelConfig.model_validate({**flags, "role_models": tuple(role_model or ())})
        except ValidationError as exc:
            name, message = first_error(exc)
            raise ConfigError(message, field=name) from None
        route_table(models)  # a malformed route is reported before anything runs
        _resume(resume, models, json_out)
        return
    if card is None and config_file is None:
        raise ConfigError("missing card (or --config FILE, or --resume TRACE)", field="card")
    base = _run_config(ctx, config_file, card)
    route_table(base.models)  # a malformed route is reported before anything runs
    role_plan(base)  # unknown or misplaced roles are reported before anything runs
    configs = [
        base.model_copy(update={"seed": s}) for s in range(base.seed, base.seed + replicates)
    ]
    if not force:
        for cfg in configs:
            path = out / trace_name(cfg.card.id, cfg.method_label, cfg.seed)
            if path.exists():
                raise ConfigError("trace already exists (use --force to replace it)", file=path)

    results: list[RunResult] = []
    started = time.perf_counter()
    show = not json_out and err_console.is_terminal

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    async def go() -> None:
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} tick steps"),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=err_console,
            disable=not show,
            transient=True,
        ) as progress:
            for cfg in configs:
                observer = _Progress(
                    progress, f"{cfg.card.id} seed {cfg.seed}", cfg.effective_ticks
                )
                result = await run_card(cfg, out, overwrite=force, observer=observer)
                results.append(result)
                if json_out:
                    sys.stdout.write(json.dumps(result.summary()) + "\n")
                    sys.stdout.flush()

    anyio.run(go)
    if json_out:
        return
    out_console.print(_summary_table(results))
    ps = [r.p_yes for r in results if r.p_yes is not None]
    if len(ps) > 1:
        out_console.print(
            f"p_yes mean {statistics.fmean(ps):.4f} · sd {statistics.stdev(ps):.4f} "
            f"over {len(ps)} replicates"
        )
    out_console.print(f"wall time {time.perf_counter() - started:.2f} s")


@app.command()
def replay(
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help="Trace file (JSONL).")],
    tick: Annotated[int | None, typer.Option(metavar="K", help="Only this tick.")] = None,
    timeline: Annotated[
        str | None, typer.Option(metavar="ID", help="Only this timeline id (e.g. t0.1).")
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="JSON lines: one per timeline-tick, then the report and audit, then the check.",
        ),
    ] = False,
) -> None:
    """Rebuild a run tick by tick from its trace alone, with no model call.

    Prints in simulated order (tick, then timeline), then the report's claims and the audit
    vector, and ends by extracting p_yes again and comparing it with the recorded one.
    """
    from worldsim.trace.reader import read_trace
    from worldsim.trace.replay import TickStep, re_extract, replay_steps

    tr = read_trace(trace)
    if tr.torn_line is not None:
        err_console.print(f"note: torn final line {tr.torn_line} ignored (the run was cut off)")
    if tr.started.kind == "direct":
        _replay_direct(tr, json_out)
        return
    recorded = recomputed = None  # a mismatch raises TraceError: one line, exit 1
    steps: list[TickStep] = []
    for item in replay_steps(tr):
        if isinstance(item, TickStep):
            if (tick is None or item.tick == tick) and (
                timeline is None or item.timeline == timeline
            ):
                steps.append(item)
        elif item[0] == "extraction":
            recorded, leaves = item[1]
            if recorded is not None:
                recomputed = re_extract(tr, recorded, leaves)
    # simulated order: tick by tick, and within a tick the timelines in lineage order
    steps.sort(key=lambda step: (step.tick, lineage(step.timeline)))
    for step in steps:
        if json_out:
            sys.stdout.write(json.dumps(step.as_json()) + "\n")
        else:
            _print_step(step)
    if tick is None and timeline is None:
        _print_outcome(tr, json_out)
    if recorded is None:
        msg = "no extraction recorded (the run did not finish); nothing to compare"
        if json_out:
            sys.stdout.write(json.dumps({"extraction": None, "note": msg}) + "\n")
        else:
            out_console.print(msg)
        return
    replayed = recomputed.p_yes if recomputed is not None else None
    if json_out:
        line = {
            "rule": recorded.rule,
            "recorded_p_yes": recorded.p_yes,
            "replayed_p_yes": replayed,
            "matches": True,
        }
        sys.stdout.write(json.dumps({"extraction": line}) + "\n")
    else:
        out_console.print(
            f"re-extracted p_yes {replayed!r} under {recorded.rule}: matches the recorded "
            f"{recorded.p_yes!r}"
        )


def _print_outcome(tr: "Trace", json_out: bool) -> None:
    """The run's report (summary and claims with their references) and its audit vector."""
    effective = tr.effective
    report = next((line.data for line in reversed(effective) if line.type == "report"), None)
    audit = next((line.data for line in reversed(effective) if line.type == "audit"), None)
    if json_out:
        payload = {
            "report": report.model_dump(mode="json") if report is not None else None,
            "audit": audit.model_dump(mode="json") if audit is not None else None,
        }
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    if report is not None:
        out_console.rule("report", style="cyan")
        out_console.print(escape(report.summary), highlight=False)
        for claim in report.claims:
            refs = "; ".join(
                ", ".join(f"{k} {v}" for k, v in ref.model_dump(exclude_none=True).items())
                for ref in claim.refs
            )
            out_console.print(
                f"  • {escape(claim.text)}  [dim]({escape(refs)})[/]", highlight=False
            )
    if audit is not None:
        out_console.rule("audit", style="cyan")
        for key, value in audit.model_dump(mode="json").items():
            if isinstance(value, list):
                value = "; ".join(str(v) for v in value) or "none"
            elif isinstance(value, float):
                value = f"{value:.12g}"  # 12 significant digits: no float noise
            out_console.print(f"  {key}: {escape(str(value))}", highlight=False)


def _replay_direct(tr: "Trace", json_out: bool) -> None:
    """A direct trace has no world to rebuild: check its extraction against the model's reply."""
    from worldsim.trace.replay import replay_direct

    result = replay_direct(tr)
    recorded = result.recorded
    if recorded is None:
        msg = "direct trace with no extraction (the model call failed); nothing to compare"
        if json_out:
            sys.stdout.write(json.dumps({"extraction": None, "note": msg}) + "\n")
        else:
            out_console.print(msg)
        return
    replayed = result.recomputed.p_yes if result.recomputed else None
    if json_out:
        extraction = {
            "rule": recorded.rule,
            "recorded_p_yes": recorded.p_yes,
            "replayed_p_yes": replayed,
            "matches": result.matches,
        }
        sys.stdout.write(json.dumps({"extraction": extraction}) + "\n")
    else:
        out_console.print(
            f"direct trace: p_yes {replayed!r} from the recorded reply under {recorded.rule} "
            f"matches the recorded {recorded.p_yes!r}"
        )


def _print_step(step: "TickStep") -> None:
    out_console.rule(
        f"{step.timeline} · tick {step.tick} · {step.date or ''} · mass {step.mass:.4f}",
        style="cyan",
    )
    for obs in step.observations:
        out_console.print(f"  event  {obs.id}: {obs.title}", highlight=False)
    accepted = {(r.agent, r.index) for r in step.review.accepted} if step.review else set()
    for p in step.proposals:
        mark = "✓" if (p.agent, p.index) in accepted else "✗"
        out_console.print(f"  {mark} {p.agent}#{p.index}: {p.summary}", highlight=False)
    if step.review is not None:
        for r in step.review.rejected:
            out_console.print(f"    rejected {r.agent}#{r.index}: {r.reason}", highlight=False)
        out_console.print(
            f"  review: {step.review.decision} — {step.review.reason}", highlight=False
        )
    for endpoint, old, new in step.ledger_changes:
        out_console.print(f"  ledger {endpoint}: {old} → {new}", highlight=False)
    for f in step.forks:
        out_console.print(
            f"  fork → {f.child} on '{f.candidate.hypothesis}' p={f.candidate.probability:.3f} "
            f"mass {f.mass_child:.4f}",
            highlight=False,
        )
    for r in step.rejected:
        outcome = (
            ""
            if r.came_true is None
            else f" (sampled: {'came true' if r.came_true else 'did not'})"
        )
        out_console.print(f"  fork rejected: {r.reason}{outcome}", highlight=False)
    pressure = ", ".join(f"{k}={v:+.3f}" for k, v in sorted(step.state.pressure.items()))
    out_console.print(
        f"  pressure {pressure} · status {step.status} · digest {step.digest[:12]}", highlight=False
    )


@app.command()
def verify(
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help="Trace file (JSONL).")],
    canonical: Annotated[bool, typer.Option(help="Print the canonical hash.")] = False,
) -> None:
    """Check a trace's hash chain and invariants; exit 0 when sound and complete.

    Exit 1 names the first bad line; exit 3 means sound but incomplete (a torn final line or no
    terminal record: the run was cut off and can be resumed).
    """
    from worldsim.trace.verify import verify_trace

    try:
        result = verify_trace(trace)
    except TraceError as exc:
        err_console.print(f"[bold red]FAIL[/] {exc}", highlight=False)
        raise typer.Exit(1) from None
    if canonical:
        out_console.print(result.canonical, highlight=False)
    lines = [f"{result.records} records, chain intact"]
    if result.replay.mass_sum is not None:
        lines.append(f"mass sums to {result.replay.mass_sum:.12f}")
    if result.replay.recorded is not None:
        lines.append(f"extraction recomputed (p_yes {result.replay.recorded.p_yes})")
    if result.torn_line is not None:
        lines.append(f"torn final line {result.torn_line} ignored")
    if not result.complete:
        lines.append(f"incomplete: ends with {result.terminal or 'no terminal record'}")
    status = "[bold green]OK[/]" if result.exit_code == 0 else "[bold yellow]INCOMPLETE[/]"
    err_console.print(f"{status} {trace}: " + "; ".join(lines), highlight=False)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


@app.command()
def roles() -> None:
    """List every runnable role, with its phase, output, prompt version and source.

    Prompt roles come from agents/ files (bundled, or the project's own), Python roles from the
    entry point group worldsim.roles.
    """
    from rich.table import Table

    from worldsim.roles.registry import registered_roles

    table = Table(title="Roles")
    for col in ("name", "phase", "output", "version", "source", "description"):
        table.add_column(col, overflow="fold")
    for spec in registered_roles().values():
        table.add_row(
            spec.name,
            spec.phase,
            spec.output or "(python)",
            spec.version,
            spec.source,
            spec.description,
        )
    out_console.print(table)
