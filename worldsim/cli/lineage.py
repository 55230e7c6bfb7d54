"""What ``replay`` and ``verify`` say of a continued run: its parent, its news, each
particle's likelihood and the re-weighting (docs/concepts.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from worldsim.cli._app import err_console, escape, out_console

__all__ = ["LINEAGE_TYPES", "Lineage", "check_parent"]

LINEAGE_TYPES = frozenset({"run_started", "news", "likelihood", "reweighting"})


class Lineage:
    """A continued run's records, noted as ``replay`` reads the trace."""

    def __init__(self) -> None:
        self.parent: Any = None
        self.news: list[Any] = []
        self.likelihoods: dict[str, Any] = {}
        self.reweighting: Any = None

    def note(self, kind: str, tl: str | None, data: Any) -> None:
        if kind == "run_started":
            self.parent = data.parent
        elif kind == "news":
            self.news.append(data)
        elif kind == "likelihood" and tl is not None:
            self.likelihoods[tl] = data
        elif kind == "reweighting":
            self.reweighting = data

    def show(self, tick: int | None, timeline: str | None, json_out: bool) -> None:
        """The news, the likelihoods and the pruning, where they happen: at the cut tick."""
        parent, weights = self.parent, self.reweighting
        if parent is None or weights is None or (tick is not None and tick != parent.tick):
            return
        rows = [r for r in weights.rows if timeline is None or r.timeline == timeline]
        if json_out:
            payload = {
                "parent": parent.model_dump(mode="json"),
                "news": [n.model_dump(mode="json") for n in self.news],
                "likelihoods": {
                    r.timeline: self.likelihoods[r.timeline].model_dump(mode="json") for r in rows
                },
                "reweighting": weights.model_dump(mode="json"),
            }
            sys.stdout.write(json.dumps({"continuation": payload}) + "\n")
            return
        out_console.rule(f"continued from run {parent.run} at tick {parent.tick}", style="cyan")
        out_console.print(
            f"parent {escape(parent.path)} · canonical {parent.canonical[:16]} · news published "
            f"in [{parent.since}, {parent.as_of})",
            highlight=False,
        )
        for n in self.news:
            stance = "—" if n.stance is None else f"{n.stance:+.2f}"
            out_console.print(
                f"news {escape(n.id)} {n.published_at} stance {stance}: {escape(n.title)}",
                highlight=False,
            )
        if not self.news:
            out_console.print("no news in that window: every likelihood is 1", highlight=False)
        for r in rows:
            fate = "pruned (mass 0)" if r.pruned else f"mass {r.prior:.4f} → {r.posterior:.4f}"
            out_console.print(f"{r.timeline}: likelihood {r.likelihood:.4g}, {fate}")
            for d in self.likelihoods[r.timeline].documents:
                out_console.print(
                    f"  {escape(d.doc_id)}: L {d.used:.4g} — {escape(d.reason)}", highlight=False
                )
        out_console.print(f"effective paths {weights.effective_paths:.3f}", highlight=False)


def check_parent(child: Path, parent: Path) -> str:
    """``verify --parent``: the lineage check, one line to say what was checked."""
    from worldsim.sim.lineage import check_lineage
    from worldsim.trace.reader import read_trace

    ref = check_lineage(read_trace(child), parent)
    line = (
        f"parent {parent} verifies, head and canonical hash match, particles at tick "
        f"{ref.tick} match"
    )
    err_console.print(escape(line), highlight=False)
    return line
