"""``worldsim gateway``: build an evidence database and search it as of a cutoff."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worldsim.cli._app import command_group, escape, fail, out_console
from worldsim.domain.errors import ConfigError, WorldsimError

if TYPE_CHECKING:
    from worldsim.gateway.documents import IngestReport
    from worldsim.gateway.gateway import SearchResult

__all__ = ["gateway_app"]

gateway_app = command_group(
    "gateway", "The Temporal Gateway: ingest dated articles and search them before a cutoff."
)


def _cutoff(text: str) -> datetime:
    from worldsim.domain.cards import parse_utc

    try:
        return parse_utc(text)
    except ValueError as exc:
        raise ConfigError(str(exc), field="--before") from None


@gateway_app.command("ingest")
def ingest(
    articles: Annotated[
        Path, typer.Argument(metavar="ARTICLES", help="JSONL file, one article per line.")
    ],
    db: Annotated[
        Path, typer.Option("--db", metavar="PATH", help="Evidence database (created if missing).")
    ],
) -> None:
    """Validate every article, then add them all to the database in one transaction.

    One bad line (no timezone, missing date, bad stance, malformed JSON) aborts the ingest
    before anything is written. Articles whose id is already present are skipped and counted.
    """
    import anyio

    from worldsim.gateway.articles import read_articles
    from worldsim.gateway.store import open_store

    try:
        docs = read_articles(articles)

        async def _run() -> "IngestReport":
            async with open_store(db, create=True) as store:
                return await store.add(docs)

        report = anyio.run(_run)
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
    out_console.print(
        f"added {report.added} document(s) to {escape(str(db))}; "
        f"{report.duplicates} duplicate(s) skipped",
        highlight=False,
    )
    if report.duplicate_ids:
        shown = ", ".join(report.duplicate_ids[:10])
        more = "" if report.duplicates <= 10 else f" (+{report.duplicates - 10} more)"
        out_console.print(f"duplicate ids: {escape(shown)}{more}", highlight=False)


@gateway_app.command("search")
def search(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="Free-text query.")],
    db: Annotated[Path, typer.Option("--db", metavar="PATH", help="Evidence database.")],
    before: Annotated[
        str,
        typer.Option(
            "--before", metavar="DATETIME", help="Cutoff: only documents dated strictly before it."
        ),
    ],
    k: Annotated[
        int, typer.Option("-k", metavar="N", min=1, max=100, help="How many results.")
    ] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Search the database as the gateway would for a card whose as-of is --before."""
    import anyio

    from worldsim.gateway.gateway import Gateway
    from worldsim.gateway.store import open_store

    try:
        cutoff = _cutoff(before)

        async def _run() -> "list[SearchResult]":
            async with open_store(db) as store:
                return await Gateway(store, cutoff=cutoff).search(query, k)

        results = anyio.run(_run)
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
    if as_json:
        payload = [hit.model_dump(mode="json") for hit in results]
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    if not results:
        out_console.print("no documents match before the cutoff", highlight=False)
        return
    for rank, hit in enumerate(results, start=1):
        out_console.print(
            f"{rank:>2}. {escape(hit.id)}  {hit.published_at}  {escape(hit.title)}  "
            f"(bm25 {hit.score:.4g})",
            highlight=False,
        )
