"""What a finished run's trace must end with, checked by ``verify`` as the trace streams past.

A run that completes writes, after its last timeline ends: its forecast graph (when its agent
condition builds one), its extraction, its report and its audit, each once, in that order, then
``run_completed``, whose counts and ``p_yes`` are those of the records before it. A trace that
claims to be complete and lacks one of them, holds one twice or out of order, or ends with a
record that disagrees with them, was not written by a run: `Ending.check` refuses it. The
forecast graph the record names by its digest is derived again from the run's records.

Its records also keep to the run's own settings: every tick within ``run_started.ticks`` (a
timeline that ends at the deadline, in the last one), the extraction under
``run_started.extraction_rule``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worldsim.domain.config import GRAPH_CONDITIONS
from worldsim.domain.errors import TraceError
from worldsim.trace.forecast import FORECAST_TYPES, ForecastRecords, forecast_json
from worldsim.trace.reader import TraceLine
from worldsim.trace.records import forecast_digest

__all__ = ["RESULTS", "Ending"]

RESULTS = ("forecast_graph", "extraction", "report", "audit")
"""The run-level results a completed run writes, in the order it writes them."""

_EXTRACTION_IN_AUDIT = {
    "mass_sum": "mass_sum",
    "unresolved_mass": "unresolved_mass",
    "rule": "extraction_rule",
}
"""An extraction's fields and the audit's fields that repeat them."""


class Ending:
    """Notes, as a trace's effective lines pass, what its end is checked against: the results
    and where they stand, the timelines, forks and rejections made, and the records the
    forecast graph is derived from (only the fields it reads, as a run keeps them)."""

    def __init__(self, path: Path, run: str, started: Mapping[str, Any]) -> None:
        self.path = path
        self.rule: str = started["extraction_rule"]
        self.ticks: int = started["ticks"]
        direct = started.get("kind") == "direct"
        condition = started.get("condition")
        self.graph_expected = not direct and (condition is None or condition in GRAPH_CONDITIONS)
        self.graph = ForecastRecords(run=run) if not direct else None
        self.results: dict[str, TraceLine] = {}
        self.timelines: set[str] = set()
        self.forks = 0
        self.rejected = 0
        self._last_result = -1

    def note(self, line: TraceLine) -> None:
        """One effective line, in order."""
        kind = line.type
        if kind in RESULTS:
            if kind in self.results:
                raise self._fail(line, f"a second {kind} record (line {self.results[kind].number})")
            at = RESULTS.index(kind)
            if at < self._last_result:
                raise self._fail(line, f"{kind} written after {RESULTS[self._last_result]}")
            self.results[kind], self._last_result = line, at
            return
        if self.results and kind not in ("llm_call", "run_completed", "run_failed"):
            raise self._fail(line, f"{kind} written after the run's results")
        if line.tick is not None and not 0 <= line.tick < self.ticks:
            raise self._fail(line, f"tick {line.tick} outside the run's {self.ticks} ticks")
        if (
            kind == "timeline_ended"
            and (end := line.data).status == "deadline"
            and end.end_tick != self.ticks - 1
        ):
            raise self._fail(
                line,
                f"timeline ended at the deadline in tick {end.end_tick}, not in the last of "
                f"the run's {self.ticks} ticks",
            )
        if kind in ("timeline_started", "particle") and line.tl is not None:
            self.timelines.add(line.tl)
        elif kind == "fork":
            self.forks += 1
        elif kind == "fork_rejected":
            self.rejected += 1
        if self.graph is not None and kind in FORECAST_TYPES:
            self.graph.keep(kind, line.tl, line.tick, line.fields)

    def check(self, terminal: TraceLine | None) -> None:
        """The results against each other and against ``terminal``, the trace's final record
        when it is ``run_completed``; a recorded graph against the records it names, always."""
        recorded = self.results.get("forecast_graph")
        if recorded is not None:
            self._check_graph(recorded)
        extracted = self.results.get("extraction")
        if extracted is not None and extracted.data.rule != self.rule:
            raise self._fail(
                extracted,
                f"extraction rule '{extracted.data.rule}' is not the run's "
                f"(run_started.extraction_rule '{self.rule}')",
            )
        if terminal is None or terminal.type != "run_completed":
            return
        expected = RESULTS if self.graph_expected else RESULTS[1:]
        missing = [kind for kind in expected if kind not in self.results]
        if missing:
            raise self._fail(terminal, f"a completed run without its {', '.join(missing)} record")
        if recorded is not None and not self.graph_expected:
            raise self._fail(recorded, "a forecast_graph record under a condition that builds none")
        extraction = self.results["extraction"].data
        done = terminal.data
        for field, value, wanted in (
            ("p_yes", done.p_yes, extraction.p_yes),
            ("timelines", done.timelines, len(self.timelines)),
            ("forks", done.forks, self.forks),
            ("forks_rejected", done.forks_rejected, self.rejected),
        ):
            if value != wanted:
                raise self._fail(
                    terminal,
                    f"run_completed {field} {value!r} differs from the run's ({wanted!r})",
                )
        audit = self.results["audit"]
        for field, in_audit in _EXTRACTION_IN_AUDIT.items():
            if getattr(audit.data, in_audit) != getattr(extraction, field):
                raise self._fail(audit, f"audit {in_audit} differs from the extraction's {field}")

    def _check_graph(self, recorded: TraceLine) -> None:
        if self.graph is None:
            raise self._fail(recorded, "a forecast_graph record in a direct forecast")
        graph = forecast_json(self.graph.views())
        data = recorded.data
        if forecast_digest(graph) != data.digest:
            raise self._fail(
                recorded,
                f"the run's records give a forecast graph of {len(graph['events'])} events and "
                f"{len(graph['links'])} links whose digest is not the recorded one "
                f"({data.event_count} events, {data.link_count} links)",
            )

    def _fail(self, line: TraceLine, message: str) -> TraceError:
        return TraceError(message, file=self.path, line=line.number)
