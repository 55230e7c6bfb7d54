"""Hindsight evaluation: post-resolution causal graphs and the scores computed against them.

See ``docs/hindsight.md``.
"""

from __future__ import annotations

from worldsim.scoring.hindsight.evidence import (
    SourcePrecision,
    accessed_documents,
    source_precision,
)
from worldsim.scoring.hindsight.forecast import (
    ForecastEvent,
    ForecastGraph,
    ForecastLink,
    TraceRecord,
    extract_forecast,
    load_forecast_events,
    read_trace,
)
from worldsim.scoring.hindsight.graph import (
    HindsightEdge,
    HindsightEvent,
    HindsightGraph,
    HindsightImpact,
    Thresholds,
    ValidationReport,
    load_hindsight,
    validate_graph,
)
from worldsim.scoring.hindsight.ker import KerReport, Match, key_event_recall, key_events
from worldsim.scoring.hindsight.pressure import (
    PressurePoint,
    causal_pressure,
    read_market,
    simulated_pressure,
    write_pressure,
)

__all__ = [
    "ForecastEvent",
    "ForecastGraph",
    "ForecastLink",
    "HindsightEdge",
    "HindsightEvent",
    "HindsightGraph",
    "HindsightImpact",
    "KerReport",
    "Match",
    "PressurePoint",
    "SourcePrecision",
    "Thresholds",
    "TraceRecord",
    "ValidationReport",
    "accessed_documents",
    "causal_pressure",
    "extract_forecast",
    "key_event_recall",
    "key_events",
    "load_forecast_events",
    "load_hindsight",
    "read_market",
    "read_trace",
    "simulated_pressure",
    "source_precision",
    "validate_graph",
    "write_pressure",
]
