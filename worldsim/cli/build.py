"""``worldsim build``: make benchmark tasks — hindsight graphs of resolved cards under quality
gates, and annotation sheets for people to check them (docs/construction.md)."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
from pathlib import Path
from typing import Annotated

import typer

from worldsim.cli._app import command_group, escape, out_console
from worldsim.cli.models import CacheDirOption
from worldsim.domain.errors import ConfigError

__all__ = ["build_app"]

build_app = command_group(
    "build",
    "Build benchmark tasks: hindsight graphs under quality gates, and their annotation sheets.",
)

GatesOption = Annotated[
    Path | None,
    typer.Option(
        "--gates",
        metavar="FILE",
        help="Quality gates (default: ./policies/build/quality.yaml, else the bundled file).",
    ),
]


def _log_path(out: Path) -> Path:
    return out.with_name(out.stem + ".build.jsonl")


@build_app.command("hindsight")
def hindsight(
    card_path: Annotated[Path, typer.Argument(metavar="CARD", help="The resolved card.")],
    label: Annotated[
        Path,
        typer.Option(metavar="PATH", help="Its label (a label file, or a folder of them)."),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", metavar="FILE", help="The graph JSON.")],
    db: Annotated[
        Path | None,
        typer.Option(metavar="DB", help="Evidence database (default: the card's evidence)."),
    ] = None,
    model: Annotated[
        str, typer.Option(metavar="ROUTE", help="Route of both roles (default: offline rules).")
    ] = "offline",
    gates: GatesOption = None,
    cache_dir: CacheDirOption = None,
    force: Annotated[bool, typer.Option(help="Replace an existing graph file.")] = False,
) -> None:
    """Build CARD's hindsight graph: a hindsight role explains, from the documents up to the
    resolution date, how it resolved; a graph-builder role turns that into events, causal edges
    and impacts, told after each round which quality gates still fail.

    A graph that meets the gates is written with graph_built: true; one that does not after the
    policy's rounds is written with graph_built: false and the failed gates, and scoring leaves
    it out. Every call and decision goes to FILE's .build.jsonl beside it. On the offline route
    the roles are rules (events from dated document titles), and the graph says so.
    """
    import anyio

    from worldsim.build.calls import BuildLog
    from worldsim.build.hindsight import build_hindsight
    from worldsim.build.policy import load_quality_policy
    from worldsim.domain.cards import load_card
    from worldsim.domain.config import ModelConfig
    from worldsim.domain.files import write_files
    from worldsim.scoring.labels import load_labels
    from worldsim.sim.session import open_models

    if out.exists() and not force:
        raise ConfigError(f"{out} exists; use --force to replace it", file=out)
    card = load_card(card_path)
    entries = load_labels(label).entries
    if card.id not in entries:
        raise ConfigError(f"no label for card '{card.id}'", file=label)
    policy, _ = load_quality_policy(gates)
    models = ModelConfig(model=model, cache_dir=cache_dir)
    log = BuildLog(_log_path(out))

    async def go() -> "object":
        async with open_models(models) as source:
            roles = {name: source.for_role(name) for name in ("hindsight", "graph_builder")}
            try:
                return await build_hindsight(
                    card,
                    entries[card.id].label,
                    roles,
                    policy,
                    log,
                    db=db,
                    card_path=card_path,
                )
            finally:
                log.write()

    graph = anyio.run(go)
    from worldsim.scoring.hindsight.graph import HindsightGraph

    assert isinstance(graph, HindsightGraph)
    text = json.dumps(graph.model_dump(mode="json", exclude_none=True), indent=2) + "\n"
    write_files({out: text.encode()})
    events = sum(not e.is_outcome for e in graph.events)
    summary = (
        f"{len(graph.edges)} edge(s), {len(graph.sources)} source(s) · log {escape(str(log.path))}"
    )
    if graph.graph_built:
        out_console.print(
            f"wrote {escape(str(out))}: graph built, {events} event(s), {summary}", highlight=False
        )
    else:
        out_console.print(
            f"wrote {escape(str(out))}: graph_built false, left out of scoring; "
            f"{events} event(s), {summary}",
            highlight=False,
        )
        for failed in graph.failed_gates:
            out_console.print(f"  failed gate: {escape(failed)}", highlight=False)


@build_app.command("annotate")
def annotate(
    graph_path: Annotated[Path, typer.Argument(metavar="GRAPH", help="A hindsight graph JSON.")],
    out: Annotated[Path, typer.Option("-o", "--out", metavar="CSV", help="The sheet to write.")],
    force: Annotated[bool, typer.Option(help="Replace an existing sheet.")] = False,
) -> None:
    """Write GRAPH's annotation sheet: one row per event with the five checks of the protocol
    (factual, date_ok, source_support, causal_relevance, not_duplicate) for a person to fill
    with yes or no, and notes. Apply it with `worldsim build apply-annotations`."""
    from worldsim.build.annotate import annotation_sheet
    from worldsim.domain.files import write_files
    from worldsim.scoring.hindsight.graph import load_hindsight

    if out.exists() and not force:
        raise ConfigError(f"{out} exists; use --force to replace it", file=out)
    graph = load_hindsight(graph_path)
    write_files({out: annotation_sheet(graph).encode()})
    rows = sum(not e.is_outcome for e in graph.events)
    out_console.print(f"wrote {escape(str(out))}: {rows} event(s) to check", highlight=False)


@build_app.command("apply-annotations")
def apply_annotations_command(
    graph_path: Annotated[Path, typer.Argument(metavar="GRAPH", help="A hindsight graph JSON.")],
    sheet: Annotated[Path, typer.Argument(metavar="SHEET", help="Its filled annotation sheet.")],
    out: Annotated[Path, typer.Option("-o", "--out", metavar="FILE", help="The graph to write.")],
    gates: GatesOption = None,
) -> None:
    """Drop the events SHEET rejects (any check answered no), with their edges and impacts;
    record in the graph's annotation why, and how many events were checked on all five points.
    A graph `build hindsight` made is checked against the quality gates again."""
    from worldsim.build.annotate import apply_annotations
    from worldsim.build.policy import load_quality_policy
    from worldsim.domain.files import write_files
    from worldsim.scoring.hindsight.graph import load_hindsight

    graph = load_hindsight(graph_path)
    policy, _ = load_quality_policy(gates)
    result = apply_annotations(graph, sheet, policy.graph)
    text = json.dumps(result.model_dump(mode="json", exclude_none=True), indent=2) + "\n"
    write_files({out: text.encode()})
    note = result.annotation
    assert note is not None
    out_console.print(
        f"wrote {escape(str(out))}: {note.checked} of {note.events} event(s) checked, "
        f"{len(note.rejected)} dropped"
        + ("" if result.graph_built else "; graph_built false: " + "; ".join(result.failed_gates)),
        highlight=False,
    )
    for r in note.rejected:
        out_console.print(
            f"  dropped {escape(r.event)}: failed {', '.join(r.failed)}"
            + (f" — {escape(r.notes)}" if r.notes else ""),
            highlight=False,
        )
