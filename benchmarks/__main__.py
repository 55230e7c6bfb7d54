"""``python -m benchmarks [--quick] [--only NAME] [--out PATH]``: run every ``bench_*.py``.

A module takes part when it defines ``run(quick: bool) -> dict`` and ``rows(result) -> list[dict]``;
others are skipped with a note. Each benchmark prints one table; all results, with the machine they
ran on, go to one JSON file.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "bench.json"


@dataclass(frozen=True, slots=True)
class Benchmark:
    name: str
    title: str
    run: Callable[[bool], dict[str, Any]]
    rows: Callable[[dict[str, Any]], list[dict[str, Any]]]


def discover(only: Sequence[str] = ()) -> tuple[list[Benchmark], list[str]]:
    """The runnable ``bench_*`` modules (sorted by name) and notes on the ones skipped."""
    found: list[Benchmark] = []
    notes: list[str] = []
    wanted = {name.removeprefix("bench_") for name in only}
    seen: set[str] = set()
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if wanted and name not in wanted:
            continue
        seen.add(name)
        try:
            module = importlib.import_module(f"{__package__ or 'benchmarks'}.{path.stem}")
        except Exception as exc:
            notes.append(f"{path.stem}: skipped, import failed: {type(exc).__name__}: {exc}")
            continue
        run, rows = getattr(module, "run", None), getattr(module, "rows", None)
        if not (callable(run) and callable(rows)):
            notes.append(f"{path.stem}: skipped, it does not define run(quick) and rows(result)")
            continue
        doc = (module.__doc__ or "").strip().splitlines()
        found.append(Benchmark(name, doc[0] if doc else name, run, rows))
    missing = wanted - seen
    notes.extend(f"bench_{name}: no such benchmark" for name in sorted(missing))
    return found, notes


def machine_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 100:
            return f"{value:.2f}"
        if abs(value) < 0.01:
            return f"{value:.2e}"
        return f"{value:,.0f}"
    return str(value)


def table(bench: Benchmark, body: list[dict[str, Any]]) -> Table:
    out = Table(title=f"{bench.name}: {bench.title}", title_justify="left")
    columns: list[str] = []
    for row in body:
        columns.extend(key for key in row if key not in columns)
    for i, column in enumerate(columns):
        out.add_column(column, justify="left" if i == 0 else "right")
    for row in body:
        out.add_row(*(_cell(row.get(column)) for column in columns))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, well under a minute")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this benchmark (fork, trace, engine, ...); may be repeated",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, metavar="FILE", help="where the JSON goes"
    )
    args = parser.parse_args(argv)
    if args.out.is_dir():  # refused before anything runs, not after
        parser.error(f"--out {args.out} is a folder: name a file, e.g. {args.out / 'bench.json'}")

    # Wide enough for every table when the output is a file or a pipe (rich's default is 80).
    console = Console(width=None if sys.stdout.isatty() else 160)
    benches, notes = discover(args.only)
    for note in notes:
        console.print(f"[yellow]{note}[/yellow]")
    report: dict[str, Any] = {
        "machine": machine_info(),
        "quick": args.quick,
        "benchmarks": {},
        "skipped": notes,
    }
    failed = 0
    for bench in benches:
        console.print(f"[dim]running {bench.name}{' (quick)' if args.quick else ''} …[/dim]")
        start = time.perf_counter()
        try:
            result = bench.run(args.quick)
            body = bench.rows(result)
        except Exception as exc:
            failed += 1
            console.print(f"[red]{bench.name} failed: {type(exc).__name__}: {exc}[/red]")
            report["benchmarks"][bench.name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
            continue
        elapsed = time.perf_counter() - start
        console.print(table(bench, body))
        console.print(f"[dim]{bench.name}: {elapsed:.1f} s[/dim]\n")
        report["benchmarks"][bench.name] = {
            "title": bench.title,
            "seconds": round(elapsed, 3),
            "rows": body,
            "result": result,
        }

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    console.print(f"results written to {args.out}")
    return 1 if failed or not benches else 0


if __name__ == "__main__":
    from worldsim.domain.collector import collector_paced

    with collector_paced():  # as the worldsim command runs
        sys.exit(main())
