"""The trace: records, writer, reader, canonical hash (DESIGN §4.8)."""

from __future__ import annotations

from worldsim.trace.reader import Trace, TraceLine, read_trace
from worldsim.trace.records import RECORD_TYPES, TRACE_ADAPTER
from worldsim.trace.writer import TraceWriter

__all__ = ["RECORD_TYPES", "TRACE_ADAPTER", "Trace", "TraceLine", "TraceWriter", "read_trace"]
