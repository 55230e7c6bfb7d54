"""Hindsight evaluation: post-resolution causal graphs and the scores computed against them.

See ``docs/hindsight.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worldsim.domain.lazy import lazy_exports

if TYPE_CHECKING:
    from worldsim.scoring.hindsight.evidence import (
        SourcePrecision,
        accessed_documents,
        source_precision,
    )
    from worldsim.scoring.hindsight.forecast import (
        ForecastEvent,
        ForecastGraph,
        ForecastLink,
        RecordView,
        extract_forecast,
        forecast_graph_json_of,
        forecast_graph_of,
        load_forecast,
        load_forecast_events,
        trace_records,
    )
    from worldsim.scoring.hindsight.graph import (
        HindsightEdge,
        HindsightEvent,
        HindsightGraph,
        HindsightImpact,
        Thresholds,
        ValidationReport,
        check_graph_card,
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

DEFAULT_DATE_WINDOW_DAYS = 7.0
"""Days between a hindsight event's date and a simulated event's date for them to match."""

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ForecastEvent": "worldsim.scoring.hindsight.forecast",
        "ForecastGraph": "worldsim.scoring.hindsight.forecast",
        "ForecastLink": "worldsim.scoring.hindsight.forecast",
        "HindsightEdge": "worldsim.scoring.hindsight.graph",
        "HindsightEvent": "worldsim.scoring.hindsight.graph",
        "HindsightGraph": "worldsim.scoring.hindsight.graph",
        "HindsightImpact": "worldsim.scoring.hindsight.graph",
        "KerReport": "worldsim.scoring.hindsight.ker",
        "Match": "worldsim.scoring.hindsight.ker",
        "PressurePoint": "worldsim.scoring.hindsight.pressure",
        "SourcePrecision": "worldsim.scoring.hindsight.evidence",
        "Thresholds": "worldsim.scoring.hindsight.graph",
        "RecordView": "worldsim.scoring.hindsight.forecast",
        "ValidationReport": "worldsim.scoring.hindsight.graph",
        "accessed_documents": "worldsim.scoring.hindsight.evidence",
        "causal_pressure": "worldsim.scoring.hindsight.pressure",
        "check_graph_card": "worldsim.scoring.hindsight.graph",
        "extract_forecast": "worldsim.scoring.hindsight.forecast",
        "forecast_graph_json_of": "worldsim.scoring.hindsight.forecast",
        "forecast_graph_of": "worldsim.scoring.hindsight.forecast",
        "key_event_recall": "worldsim.scoring.hindsight.ker",
        "key_events": "worldsim.scoring.hindsight.ker",
        "load_forecast": "worldsim.scoring.hindsight.forecast",
        "load_forecast_events": "worldsim.scoring.hindsight.forecast",
        "load_hindsight": "worldsim.scoring.hindsight.graph",
        "read_market": "worldsim.scoring.hindsight.pressure",
        "trace_records": "worldsim.scoring.hindsight.forecast",
        "simulated_pressure": "worldsim.scoring.hindsight.pressure",
        "source_precision": "worldsim.scoring.hindsight.evidence",
        "validate_graph": "worldsim.scoring.hindsight.graph",
        "write_pressure": "worldsim.scoring.hindsight.pressure",
    },
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
    "RecordView",
    "SourcePrecision",
    "Thresholds",
    "ValidationReport",
    "accessed_documents",
    "causal_pressure",
    "check_graph_card",
    "extract_forecast",
    "forecast_graph_json_of",
    "forecast_graph_of",
    "key_event_recall",
    "key_events",
    "load_forecast",
    "load_forecast_events",
    "load_hindsight",
    "read_market",
    "simulated_pressure",
    "source_precision",
    "trace_records",
    "validate_graph",
    "write_pressure",
]
