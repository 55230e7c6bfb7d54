"""``worldsim forecast``: the direct baseline, one model call per card."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worldsim.cli._app import SignKeyOption, app, escape, on_budget, on_interrupt, out_console
from worldsim.cli.settings import given_options, run_config, with_model_options

if TYPE_CHECKING:
    from worldsim.sim.direct import DirectResult
    from worldsim.trace.signing import Signer

__all__ = ["forecast"]


@app.command()
@with_model_options
def forecast(
    ctx: typer.Context,
    card: Annotated[
        Path,
        typer.Argument(
            metavar="CARD", help="Scenario card (YAML or JSON), binary or multiple choice."
        ),
    ],
    model: Annotated[
        str,
        typer.Option(
            metavar="ROUTE",
            help="Model route (provider/model). 'offline' answers with the card's base rate.",
        ),
    ],
    seed: Annotated[int, typer.Option(min=0, help="Seed sent with the request.")] = 0,
    direct_role: Annotated[
        str | None,
        typer.Option(
            "--role",
            metavar="NAME",
            help="The prompt role to ask (phase direct; default direct, or direct_choice for "
            "a card with several choices); see `worldsim roles`.",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(metavar="DIR", help="Folder for the trace.")] = Path(
        "traces"
    ),
    method_label: Annotated[
        str, typer.Option(metavar="NAME", help="Method label in the trace and its file name.")
    ] = "direct",
    force: Annotated[
        bool, typer.Option(help="Replace an existing trace of the same name.")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object, nothing else.")
    ] = False,
    sign_key: SignKeyOption = None,
    **model_options: Any,
) -> None:
    """Forecast a card with one structured model call (the direct baseline) and trace it.

    A binary card gets p_yes; a multiple-choice card a probability per outcome.

    The trace's head is printed at the end: record it to pin the trace (verify --expect-head).
    """
    import anyio

    from worldsim.cli.models import preflight_routes
    from worldsim.domain.config import DEFAULT_POLICY
    from worldsim.sim.session import forecast as run_forecast
    from worldsim.sim.session import prepare
    from worldsim.trace.signing import load_signer

    signer = load_signer(sign_key) if sign_key is not None else None  # before any file
    # every value is validated here, before anything is written: a bad one is a ConfigError
    direct = {"kind": "direct", "policy": DEFAULT_POLICY}
    config = run_config(
        given_options(ctx),
        card=card,
        fixed={**direct, "roles": {"direct": direct_role} if direct_role else {}},
    )
    prepared = prepare(config)  # a role of another phase, a bad route: exit 2
    preflight_routes(config.models, model_options["preflight"])
    path = prepared.trace_path(out)
    left = f"the forecast's trace {path} is cut off: run it again with --force (it never resumes)"
    with on_interrupt(lambda: left), on_budget(", run again with --force"):  # it starts over
        result = anyio.run(lambda: run_forecast(config, out, overwrite=force, signer=signer))
    if json_out:
        sys.stdout.write(json.dumps(result.summary()) + "\n")
        sys.stdout.flush()
        return
    _report(result, signer)


def _report(result: "DirectResult", signer: "Signer | None") -> None:
    """The forecast, the reply's rationale, its cost and the trace's anchor."""
    cost = result.cost_usd
    rationale = " ".join(result.output.rationale.split())
    lines = [
        f"[bold]{escape(result.card_id)}[/] · {escape(result.method)} · seed {result.seed} · "
        f"{escape(result.model)}",
        (
            f"p_yes {result.p_yes:.4f}"
            if result.p_yes is not None
            else " · ".join(f"{k} {v:.4f}" for k, v in sorted((result.p_options or {}).items()))
        ),
        f"rationale: {escape(rationale[:200])}{'…' if len(rationale) > 200 else ''}",
        f"cache {result.call.get('cache')} · cost "
        + (f"${cost:.6f}" if cost is not None else "unpriced")
        + (" · leakage warning from the model" if result.output.leakage_warning else ""),
        f"trace {escape(str(result.trace))} · head {result.head}"
        + (f" · signed by key {signer.key_id}" if signer is not None else ""),
    ]
    for line in lines:
        out_console.print(line, highlight=False)
