"""``worldsim score --attribution``: what moved each forecast, largest first."""

from __future__ import annotations

import json
from pathlib import Path

from worldsim.cli._app import err_console, escape, out_console
from worldsim.domain.errors import ConfigError, TraceIncomplete

__all__ = ["print_attribution", "trace_files"]


def trace_files(inputs: list[Path]) -> list[Path]:
    """The traces ``inputs`` name: files, and the ``*.jsonl`` of folders (a study folder's
    ``traces/``)."""
    found: list[Path] = []
    for item in inputs:
        if item.is_dir():
            folder = item / "traces" if (item / "traces").is_dir() else item
            found.extend(sorted(folder.rglob("*.jsonl")))
        elif item.is_file():
            found.append(item)
        else:
            raise ConfigError("not found", file=item)
    if not found:
        raise ConfigError("no traces to attribute", field="INPUT")
    return found


def print_attribution(inputs: list[Path], json_path: Path | None) -> None:
    """Print each trace's attribution (and write them all as JSON to ``json_path``)."""
    from worldsim.domain.files import write_files
    from worldsim.scoring.attribution import attribute

    made = []
    skipped: list[str] = []
    for path in trace_files(inputs):
        try:
            made.append(attribute(path))
        except TraceIncomplete as exc:  # as score skips it: nothing to attribute yet
            skipped.append(f"{path}: {exc.message}; skipped")
            err_console.print(f"[yellow]warning:[/] {escape(skipped[-1])}", highlight=False)
    if not made:
        why = "; ".join(skipped[:3]) + (" ..." if len(skipped) > 3 else "")
        raise TraceIncomplete(f"no completed trace to attribute ({why})")
    for a in made:
        out_console.rule(f"{a.card_id} · p_yes {a.p_yes:.4f} · {a.trace.name}", style="cyan")
        if a.parent_p_yes is not None:
            out_console.print(
                f"parent p_yes {a.parent_p_yes:.4f} · re-weighted by the news, without new "
                f"simulation {a.p_reweighted:.4f}",
                highlight=False,
            )
        else:
            out_console.print(f"with every fork folded back: {a.base:.4f}", highlight=False)
        for c in a.ranked:
            where = f" at tick {c.tick}" if c.tick is not None else ""
            about = f" — {escape(c.detail)}" if c.detail else ""
            out_console.print(
                f"{c.amount:+.4f}  {c.kind} {escape(c.what)}{where}{about}", highlight=False
            )
    if json_path is not None:
        text = json.dumps([a.as_json() for a in made], indent=2) + "\n"
        write_files({json_path: text.encode()})
