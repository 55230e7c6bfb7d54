"""``worldsim build``: make benchmark tasks — hindsight graphs of resolved cards under quality
gates, and annotation sheets for people to check them (docs/construction.md)."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worldsim.cli._app import command_group, escape, out_console
from worldsim.cli.settings import CacheDirOption
from worldsim.domain.errors import ConfigError

if TYPE_CHECKING:
    from worldsim.build.questions import Built

__all__ = ["build_app"]

build_app = command_group(
    "build",
    "Build benchmark tasks: questions from dated articles and markets, hindsight graphs under "
    "quality gates, and their annotation sheets.",
)

ModelOption = Annotated[
    str, typer.Option(metavar="ROUTE", help="Route of both roles (default: offline rules).")
]
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
    model: ModelOption = "offline",
    gates: GatesOption = None,
    cache_dir: CacheDirOption = None,
    force: Annotated[bool, typer.Option(help="Replace an existing graph file.")] = False,
) -> None:
    """Build CARD's hindsight graph: a hindsight role explains, from the documents up to the
    resolution date, how it resolved; a graph-builder role turns that into events, causal edges
    and impacts, told after each round which quality gates still fail.

    A graph that meets the gates is written with graph_built: true; one that does not after the
    policy's rounds is written with graph_built: false and the failed gates, and scoring leaves
    it out. A label whose outcome is none of CARD's endpoints, or whose resolved_at is before
    CARD's as_of, is refused. Every call and decision goes to FILE's .build.jsonl beside it.
    On the offline route the roles are rules (events from dated document titles), and the
    graph says so.
    """
    import anyio

    from worldsim.build.calls import BuildLog, run_build
    from worldsim.build.hindsight import ROLES as HINDSIGHT_ROLES
    from worldsim.build.hindsight import build_hindsight, check_resolution, outcome_endpoint
    from worldsim.build.policy import load_quality_policy
    from worldsim.domain.cards import load_card
    from worldsim.domain.config import ModelConfig
    from worldsim.domain.paths import check_file_targets
    from worldsim.scoring.hindsight.graph import graph_json
    from worldsim.scoring.labels import load_labels

    check_file_targets([out, _log_path(out)])
    if out.exists() and not force:
        raise ConfigError("exists; use --force to replace it", file=out)
    card = load_card(card_path)
    entries = load_labels(label).entries
    if card.id not in entries:
        raise ConfigError(f"no label for card '{card.id}'", file=label)
    if entries[card.id].label.provisional:
        raise ConfigError(
            f"the label of card '{card.id}' is provisional: its question is still open",
            file=label,
        )
    try:
        outcome_endpoint(card, entries[card.id].outcome)
        check_resolution(card, entries[card.id].label)
    except ConfigError as exc:
        raise entries[card.id].refuse(exc.message, exc.field or "outcome") from None
    policy, _ = load_quality_policy(gates)
    models = ModelConfig(model=model, cache_dir=cache_dir)
    log = BuildLog(_log_path(out))

    graph = anyio.run(
        run_build,
        models,
        HINDSIGHT_ROLES,
        log,
        lambda roles: build_hindsight(
            card, entries[card.id].label, roles, policy, log, db=db, card_path=card_path
        ),
        lambda built: {out: graph_json(built)},
    )
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
    from worldsim.domain.paths import check_file_targets
    from worldsim.scoring.hindsight.graph import load_hindsight

    check_file_targets([out])
    if out.exists() and not force:
        raise ConfigError("exists; use --force to replace it", file=out)
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
    from worldsim.scoring.hindsight.graph import graph_json, load_hindsight

    graph = load_hindsight(graph_path)
    policy, _ = load_quality_policy(gates)
    result = apply_annotations(graph, sheet, policy.graph)
    write_files({out: graph_json(result)})
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


@build_app.command("questions")
def questions(
    articles: Annotated[
        Path | None,
        typer.Argument(
            metavar="ARTICLES", help="Dated articles, JSON Lines (as `gateway ingest` reads)."
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("-o", "--out", metavar="DIR", help="Folder for the cards.")
    ] = Path("cards"),
    db: Annotated[
        Path | None,
        typer.Option(
            metavar="DB", help="Read the articles from this evidence database; cards name it."
        ),
    ] = None,
    markets: Annotated[
        Path | None,
        typer.Option(metavar="JSONL", help="Prediction markets (docs/construction.md)."),
    ] = None,
    model: ModelOption = "offline",
    gates: GatesOption = None,
    cache_dir: CacheDirOption = None,
    force: Annotated[bool, typer.Option(help="Write into a folder that holds cards.")] = False,
) -> None:
    """Propose forecasting questions from dated articles (clustered by topic) and markets,
    score each for clarity, measurability and answerability, check its temporal validity, merge
    near-duplicates, and write one card per question kept into DIR, with DIR/rejects.jsonl (every
    question refused, with its reasons) and DIR/build.jsonl (every call and decision).

    On the offline route the roles are rules: a question from each sentence that schedules
    something for a later date, scored from its form; the cards say so in their provenance.
    """
    import anyio

    from worldsim.build.calls import BuildLog, run_build
    from worldsim.build.policy import load_quality_policy
    from worldsim.build.questions import ROLES as QUESTION_ROLES
    from worldsim.build.questions import Article, build_questions, read_markets
    from worldsim.domain.config import ModelConfig
    from worldsim.domain.paths import check_folder_target
    from worldsim.gateway.articles import read_articles
    from worldsim.gateway.store import open_store

    if (articles is None) == (db is None) and markets is None:
        raise ConfigError("give ARTICLES or --db (and/or --markets)", field="articles")
    if articles is not None and db is not None:
        raise ConfigError("give ARTICLES or --db, not both", field="db")
    check_folder_target(out, "--out")
    if out.exists() and any(out.glob("*.yaml")) and not force:
        raise ConfigError(f"{out} holds cards already; use --force to add to it", file=out)
    policy, _ = load_quality_policy(gates)
    found = read_markets(markets) if markets is not None else []

    async def read_db(path: Path) -> "list[Article]":
        async with open_store(path) as store:
            return [Article.of(d) for d in await store.documents()]

    if articles is not None:
        docs = [Article.of(d) for d in read_articles(articles)]
    elif db is not None:
        docs = anyio.run(read_db, db)
    else:
        docs = []
    source_file = (articles or db or markets or Path("-")).name
    evidence = None
    if db is not None:  # the cards name the database as a path from their own folder
        import os

        evidence = os.path.relpath(db.resolve(), out.resolve())
    log = BuildLog(out / "build.jsonl")
    models = ModelConfig(model=model, cache_dir=cache_dir)

    built = anyio.run(
        run_build,
        models,
        QUESTION_ROLES,
        log,
        lambda roles: build_questions(
            docs, found, roles, policy, log, source_file=source_file, evidence_db=evidence
        ),
        lambda made: _question_files(made, out),
    )
    out_console.print(
        f"{len(built.cards)} card(s), {len(built.rejects)} rejected, {len(built.merged)} merged "
        f"→ {escape(str(out))} (rejects.jsonl, build.jsonl)",
        highlight=False,
    )


def _question_files(built: "Built", out: Path) -> dict[Path, bytes]:
    """What `build questions` writes into ``out``: a card per question kept, rejects.jsonl and
    each market question's prices."""
    from worldsim.build.questions import rejects_jsonl
    from worldsim.interop.questions import card_yaml

    files = {out / f"{card.id}.yaml": card_yaml(card) for card in built.cards}
    files[out / "rejects.jsonl"] = rejects_jsonl(built)
    for card_id, prices in built.prices.items():
        rows = "date,price\n" + "".join(f"{d},{p}\n" for d, p in prices)
        files[out / f"{card_id}.prices.csv"] = rows.encode()
    return files
