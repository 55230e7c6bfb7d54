"""``worldsim cache``: the user-level response cache, its size and pruning."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time.

import json
from pathlib import Path
from typing import Annotated

import typer

from worldsim.cli._app import JsonOption, command_group, escape, out_console
from worldsim.cli.settings import CacheDirOption

__all__ = ["cache_app"]

cache_app = command_group(
    "cache", "The response cache every run, forecast and study shares: its size, and pruning."
)


def _file(cache_dir: Path | None) -> Path:
    from worldsim.models.cache import CACHE_FILE, default_cache_dir

    return (cache_dir or default_cache_dir()) / CACHE_FILE


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


@cache_app.command("info")
def info(
    cache_dir: CacheDirOption = None,
    json_out: JsonOption = False,
) -> None:
    """Where the cache is, its size, how many replies it holds, from when, and per route."""
    from worldsim.models.cache import summarize

    s = summarize(_file(cache_dir))
    if json_out:
        data = {
            "path": str(s.path),
            "bytes": s.bytes,
            "entries": s.entries,
            "oldest": s.oldest,
            "newest": s.newest,
            "routes": s.routes,
        }
        out_console.print_json(json.dumps(data))
        return
    out_console.print(f"cache   {escape(str(s.path))}", highlight=False)
    out_console.print(f"size    {_mib(s.bytes)}", highlight=False)
    out_console.print(f"entries {s.entries}", highlight=False)
    if s.entries:
        out_console.print(f"stored  {s.oldest} … {s.newest}", highlight=False)
    for route, n in s.routes.items():
        out_console.print(f"  {escape(route)}  {n}", highlight=False)


@cache_app.command("prune")
def prune(
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            min=0.0,
            max=36_500.0,
            metavar="DAYS",
            help="Delete replies stored more than DAYS ago (at most 36500, a century).",
        ),
    ] = None,
    everything: Annotated[bool, typer.Option("--all", help="Delete every reply.")] = False,
    cache_dir: CacheDirOption = None,
) -> None:
    """Delete cached replies by age (or all of them); the file is compacted afterwards.

    A run whose replies are gone pays for its model calls again, and a strict replay of it
    (--replay-strict) fails: prune what you no longer need to reproduce.
    """
    from datetime import UTC, datetime, timedelta

    from worldsim.domain.errors import ConfigError
    from worldsim.models.cache import prune as prune_cache

    if (older_than is None) == (not everything):
        raise ConfigError("give --older-than DAYS or --all", field="--older-than")
    before = None if everything else datetime.now(UTC) - timedelta(days=older_than or 0.0)
    path = _file(cache_dir)
    gone = prune_cache(path, stored_before=before)
    out_console.print(f"pruned {gone} replies from {escape(str(path))}", highlight=False)
