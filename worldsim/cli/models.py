"""``worldsim models check``: measure a route before a run, and the brief automatic preflight.

The shared model options are declared in `worldsim.cli.settings`.
"""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time.

import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worldsim.cli._app import JsonOption, command_group, err_console, escape, out_console
from worldsim.domain.errors import ConfigError, WorldsimRuntimeError

if TYPE_CHECKING:
    from worldsim.domain.config import ModelConfig, RouteOptions
    from worldsim.domain.contracts import ModelRequest, ModelResponse
    from worldsim.models.preflight import Estimate, Measurement, PlannedCall

__all__ = ["preflight_routes"]

models_app = command_group("models", "Model routes: measure one before running on it.")

PREFLIGHT_FILE = "preflight.json"
"""Routes already measured, in the response cache's folder: the automatic preflight runs
once per route and server, whatever the output folder."""


class _Counting:
    """The offline model, noting each request as a `PlannedCall` (a dry run's calls)."""

    def __init__(self) -> None:
        from worldsim.offline import OfflineModel

        self.model = OfflineModel()
        self.calls: list[PlannedCall] = []

    @property
    def route(self) -> str:
        return self.model.route

    def for_role(self, role: str) -> "_Counting":
        return self

    async def request(self, request: "ModelRequest") -> "ModelResponse":
        from worldsim.models.preflight import PlannedCall

        response = await self.model.request(request)
        prompt = sum(len(m.content) for m in request.chat()) // 4
        out = len(response.output.model_dump_json()) // 4
        self.calls.append(PlannedCall(request.site.role, request.max_tokens, prompt, out))
        return response


def _dry_run(card: Path, policy: str, ticks: int | None, direct: bool) -> "list[PlannedCall]":
    """The calls a run of ``card`` makes, from a run with the offline model in a scratch folder."""
    import anyio

    from worldsim.domain.config import RunConfig
    from worldsim.sim.session import forecast, run_card

    data: dict[str, Any] = {"card": str(card), "policy": policy, "ticks": ticks}
    if direct:
        data.update(kind="direct", ticks=None)
    config = RunConfig.from_dict(data)
    source = _Counting()
    with tempfile.TemporaryDirectory() as scratch:
        if direct:
            anyio.run(lambda: forecast(config, scratch, fsync=False, model_source=source))
        else:
            anyio.run(lambda: run_card(config, scratch, fsync=False, model_source=source))
    return source.calls


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _speed(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _describe(m: "Measurement") -> list[str]:
    first = "?" if m.latency_s is None else f"{m.latency_s:.2f} s"
    lines = [
        f"first token {first}"
        f" · free {_speed(m.free_tokens_per_s)} tokens/s"
        f" · constrained (json_schema) {_speed(m.constrained_tokens_per_s)} tokens/s"
        + (f" · prompt {m.prompt_tokens_per_s:.0f} tokens/s" if m.prompt_tokens_per_s else "")
        + (f" · context {m.context_tokens} tokens" if m.context_tokens else " · context unknown")
    ]
    if m.modes:
        lines.append(
            "output modes: "
            + ", ".join(
                f"{c.mode} {'ok' if c.ok else 'no'}"
                + (f" ({c.seconds:.1f} s)" if c.ok else f" ({c.note})" if c.note else "")
                for c in m.modes
            )
        )
    return lines


def _describe_estimate(e: "Estimate", what: str) -> list[str]:
    lines = [
        f"estimate for {what}: {e.calls} calls, ~{e.prompt_tokens} prompt tokens, "
        f"~{e.output_tokens} output tokens, ~{_duration(e.wall_s)} "
        f"(up to {_duration(e.worst_wall_s)} if every reply runs to max_tokens)"
    ]
    lines += [f"warning: {w}" for w in e.warnings]
    return lines


def _route_setup(route: str, routes_file: Path | None) -> "tuple[Any, RouteOptions]":
    from worldsim.models.pool import route_options
    from worldsim.models.routes import parse_route, resolve_settings

    parsed = parse_route(route, field="ROUTE")
    if parsed.is_offline:
        raise ConfigError("the offline route needs no check", field="ROUTE")
    routes = {}
    if routes_file is not None:
        from worldsim.domain.config import load_routes_file

        routes = load_routes_file(routes_file)
    return resolve_settings(parsed), route_options(routes, parsed)


@models_app.command("check")
def check(
    route: Annotated[str, typer.Argument(metavar="ROUTE", help="The route, e.g. local/smollm2.")],
    routes_file: Annotated[
        Path | None,
        typer.Option("--routes", metavar="FILE", help="Routes file with this route's settings."),
    ] = None,
    card: Annotated[
        Path | None,
        typer.Option(metavar="CARD", help="Estimate calls, tokens and time of a run of this card."),
    ] = None,
    policy: Annotated[
        str, typer.Option(metavar="NAME|FILE", help="Branch policy of the estimated run.")
    ] = "branching",
    ticks: Annotated[int | None, typer.Option(min=1, help="Ticks of the estimated run.")] = None,
    direct: Annotated[
        bool, typer.Option(help="Estimate a direct forecast (one call) instead of a run.")
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(min=0.001, metavar="S", help="No-progress timeout to judge by.")
    ] = None,
    deadline: Annotated[
        float | None, typer.Option(min=0.001, metavar="S", help="Run deadline to judge by.")
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Calls the server answers at once (its parallel slots).")
    ] = 1,
    quick: Annotated[bool, typer.Option(help="Two short requests only.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Measure a route: time to the first token, tokens per second free and under a JSON
    schema, prompt speed, which output modes work and the context size; with --card, estimate
    a run's calls, tokens and wall time, and warn when a role's max_tokens cannot finish within
    the limits. Sends a few small requests; nothing is cached or traced."""
    import dataclasses

    import anyio

    from worldsim.models.preflight import estimate, measure

    settings, options = _route_setup(route, routes_file)
    calls = _dry_run(card, policy, ticks, direct) if card is not None else None
    limit = timeout or options.timeout_s or 60.0
    m = anyio.run(lambda: measure(settings, options, quick=quick, timeout_s=limit))
    if m.error is not None and m.latency_s is None:
        raise WorldsimRuntimeError(
            f"route {route} ({settings.base_url_host}) did not answer: {m.error}"
        )
    result: dict[str, Any] = {"measurement": dataclasses.asdict(m)}
    lines = [f"route {route} ({settings.base_url_host})", *_describe(m)]
    if calls is not None and card is not None:
        e = estimate(
            calls,
            m,
            options,
            timeout_s=limit,
            deadline_s=deadline,
            streams=options.stream is not False,
            concurrency=concurrency,
        )
        result["estimate"] = dataclasses.asdict(e)
        lines += _describe_estimate(e, f"{card.name} ({'direct' if direct else policy})")
    if json_out:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        for line in lines:
            out_console.print(escape(line), highlight=False)
    if m.modes and not any(c.ok for c in m.modes):
        raise WorldsimRuntimeError(
            f"route {route} ({settings.base_url_host}) answered, but in no output mode with "
            "a valid JSON object: a run on it would fail"
        )


def preflight_routes(
    models: "ModelConfig", asked: bool | None, measured: set[str] | None = None
) -> None:
    """The brief preflight before a run: each remote route not measured before (per server)
    gets two short requests and one line on standard error. ``asked`` ``None`` means only on a
    terminal; a route's ``preflight: false`` turns it off. The offline route never has one.
    ``measured`` collects the routes measured in this invocation, so that a study's methods
    sharing a route measure it once."""
    import functools

    import anyio

    from worldsim.models.cache import default_cache_dir
    from worldsim.models.pool import route_options
    from worldsim.models.routes import RouteTable, resolve_settings

    if asked is False or (asked is None and not err_console.is_terminal):
        return
    table = RouteTable.from_flags(models.model, models.role_models)
    record = (models.cache_dir or default_cache_dir()) / PREFLIGHT_FILE
    try:
        seen = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        seen = {}
    for route in sorted(table.routes(), key=lambda r: r.name):
        options = route_options(models.routes, route)
        if route.is_offline or options.preflight is False:
            continue
        settings = resolve_settings(route)
        key = f"{route.name}@{settings.base_url_host}"
        if (key in seen and asked is None) or (measured is not None and key in measured):
            continue
        if measured is not None:
            measured.add(key)
        from worldsim.models.preflight import measure  # with a remote route only

        m = anyio.run(functools.partial(measure, settings, options, quick=True))
        summary = " · ".join(_describe(m)) if m.error is None else f"no answer: {m.error}"
        err_console.print(f"preflight {escape(route.name)}: {escape(summary)}", highlight=False)
        if m.error is None:
            seen[key] = {
                "free_tokens_per_s": m.free_tokens_per_s,
                "constrained_tokens_per_s": m.constrained_tokens_per_s,
            }
            from worldsim.domain.files import write_files

            text = json.dumps(seen, indent=1, sort_keys=True)
            write_files({record: text.encode("utf-8")})
