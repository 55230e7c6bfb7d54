"""Trace records (DESIGN §4.8): one pydantic model per record type, one discriminated union.

Every line of a trace is an envelope ``{"v", "seq", "ts", "run", "type", "tl", "tick", "prev",
"data"}``; ``type`` selects the model of ``data``. docs/trace-format.md is generated from these
models (``python -m worldsim.trace.schema``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    TypeAdapter,
)

from worldsim.domain.values import FrozenModel
from worldsim.gateway.access import RetrievalRecord as RetrievalData
from worldsim.models.call import LlmCallData
from worldsim.trace.data import (
    AuditData,
    ForecastEvent,
    ForecastGraph,
    ForecastGraphData,
    ForecastLink,
    ForkData,
    ForkRejectedData,
    InterventionData,
    KeyId,
    Observation,
    Payload,
    ProposalData,
    ProposalsData,
    ReportData,
    RetrievalsData,
    ReviewData,
    RunCompletedData,
    RunFailedData,
    RunResumedData,
    RunStartedData,
    Signature,
    TickCommittedData,
    TickStartedData,
    TimelineEndedData,
    TimelineStartedData,
    WorldInitializedData,
    accesses_of,
    forecast_digest,
    proposals_of,
)
from worldsim.trace.lineage import (
    LikelihoodData,
    NewsData,
    ParentRef,
    ParticleData,
    ReweightingData,
)
from worldsim.world.outcome import ExtractionData, LeafData

__all__ = [
    "FORMAT_VERSION",
    "LAST_READER_OF",
    "RECORD_TYPES",
    "TICK_TYPES",
    "TRACE_ADAPTER",
    "AuditData",
    "ExtractionData",
    "ForecastEvent",
    "ForecastGraph",
    "ForecastGraphData",
    "ForecastLink",
    "ForkData",
    "ForkRejectedData",
    "InterventionData",
    "KeyId",
    "LeafData",
    "LikelihoodData",
    "NewsData",
    "Observation",
    "ParentRef",
    "ParticleData",
    "Payload",
    "ProposalData",
    "ProposalsData",
    "ReportData",
    "RetrievalData",
    "RetrievalsData",
    "ReviewData",
    "ReweightingData",
    "RunCompletedData",
    "RunFailedData",
    "RunResumedData",
    "RunStartedData",
    "Signature",
    "TickCommittedData",
    "TickStartedData",
    "TimelineEndedData",
    "TimelineStartedData",
    "TraceRecord",
    "WorldInitializedData",
    "accesses_of",
    "forecast_digest",
    "proposals_of",
]


FORMAT_VERSION = 2
"""The trace format this worldsim writes and reads: every envelope's ``v``."""


LAST_READER_OF = {1: "0.2.0"}
"""For each earlier trace format, the last worldsim release that reads it."""


class _Envelope(FrozenModel):
    v: Literal[2]  # FORMAT_VERSION
    seq: int = Field(ge=0)
    ts: str
    run: str
    tl: str | None
    tick: int | None
    prev: str = Field(pattern=r"^[0-9a-f]{64}$")


class RunStartedRecord(_Envelope):
    type: Literal["run_started"]
    data: RunStartedData


class WorldInitializedRecord(_Envelope):
    type: Literal["world_initialized"]
    data: WorldInitializedData


class TimelineStartedRecord(_Envelope):
    type: Literal["timeline_started"]
    data: TimelineStartedData


class TickStartedRecord(_Envelope):
    type: Literal["tick_started"]
    data: TickStartedData


class ProposalsRecord(_Envelope):
    type: Literal["proposals"]
    data: ProposalsData


class ReviewRecord(_Envelope):
    type: Literal["review"]
    data: ReviewData


class ForkRecord(_Envelope):
    type: Literal["fork"]
    data: ForkData


class ForkRejectedRecord(_Envelope):
    type: Literal["fork_rejected"]
    data: ForkRejectedData


class TickCommittedRecord(_Envelope):
    type: Literal["tick_committed"]
    data: TickCommittedData


class TimelineEndedRecord(_Envelope):
    type: Literal["timeline_ended"]
    data: TimelineEndedData


class LlmCallRecord(_Envelope):
    type: Literal["llm_call"]
    data: LlmCallData


class InterventionRecord(_Envelope):
    type: Literal["intervention"]
    data: InterventionData


class RunResumedRecord(_Envelope):
    type: Literal["run_resumed"]
    data: RunResumedData


class RetrievalsRecord(_Envelope):
    type: Literal["retrievals"]
    data: RetrievalsData


class ExtractionRecord(_Envelope):
    type: Literal["extraction"]
    data: ExtractionData


class ReportRecord(_Envelope):
    type: Literal["report"]
    data: ReportData


class AuditRecord(_Envelope):
    type: Literal["audit"]
    data: AuditData


class ForecastGraphRecord(_Envelope):
    type: Literal["forecast_graph"]
    data: ForecastGraphData


class ParticleRecord(_Envelope):
    type: Literal["particle"]
    data: ParticleData


class NewsRecord(_Envelope):
    type: Literal["news"]
    data: NewsData


class LikelihoodRecord(_Envelope):
    type: Literal["likelihood"]
    data: LikelihoodData


class ReweightingRecord(_Envelope):
    type: Literal["reweighting"]
    data: ReweightingData


class RunCompletedRecord(_Envelope):
    type: Literal["run_completed"]
    data: RunCompletedData


class RunFailedRecord(_Envelope):
    type: Literal["run_failed"]
    data: RunFailedData


RECORD_TYPES: dict[str, type[BaseModel]] = {
    "run_started": RunStartedData,
    "world_initialized": WorldInitializedData,
    "timeline_started": TimelineStartedData,
    "tick_started": TickStartedData,
    "proposals": ProposalsData,
    "review": ReviewData,
    "fork": ForkData,
    "fork_rejected": ForkRejectedData,
    "tick_committed": TickCommittedData,
    "timeline_ended": TimelineEndedData,
    "retrievals": RetrievalsData,
    "llm_call": LlmCallData,
    "run_resumed": RunResumedData,
    "intervention": InterventionData,
    "particle": ParticleData,
    "news": NewsData,
    "likelihood": LikelihoodData,
    "reweighting": ReweightingData,
    "forecast_graph": ForecastGraphData,
    "extraction": ExtractionData,
    "report": ReportData,
    "audit": AuditData,
    "run_completed": RunCompletedData,
    "run_failed": RunFailedData,
}

TICK_TYPES = frozenset(
    {"tick_started", "proposals", "review", "fork", "fork_rejected", "tick_committed"}
)
"""The records of one tick of a timeline (its ``tl`` and ``tick`` set)."""


TraceRecord = Annotated[
    RunStartedRecord
    | WorldInitializedRecord
    | TimelineStartedRecord
    | TickStartedRecord
    | ProposalsRecord
    | ReviewRecord
    | ForkRecord
    | ForkRejectedRecord
    | TickCommittedRecord
    | TimelineEndedRecord
    | RetrievalsRecord
    | LlmCallRecord
    | RunResumedRecord
    | InterventionRecord
    | ParticleRecord
    | NewsRecord
    | LikelihoodRecord
    | ReweightingRecord
    | ForecastGraphRecord
    | ExtractionRecord
    | ReportRecord
    | AuditRecord
    | RunCompletedRecord
    | RunFailedRecord,
    Field(discriminator="type"),
]


TRACE_ADAPTER: TypeAdapter[Any] = TypeAdapter(TraceRecord)
"""The one adapter that validates any trace line."""
