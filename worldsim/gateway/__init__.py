"""The Temporal Gateway: a dated evidence store and the cutoff-bound tools agents search it with.

See ``docs/gateway.md``.
"""

from __future__ import annotations

from worldsim.gateway.gateway import (
    DocumentView,
    Gateway,
    RetrievalRecord,
    SearchResult,
    gateway_for_card,
    retrieved_by,
    unretrieved_citations,
)
from worldsim.gateway.store import (
    EvidenceStore,
    IngestReport,
    SearchHit,
    StoredDocument,
    memory_store,
    open_store,
    read_articles,
)
from worldsim.gateway.tools import (
    GATEWAY_TOOLS,
    OPEN_DOCUMENT,
    SEARCH_EVIDENCE,
    AgentTools,
    OpenDocumentArgs,
    SearchEvidenceArgs,
    ToolSpec,
)

__all__ = [
    "GATEWAY_TOOLS",
    "OPEN_DOCUMENT",
    "SEARCH_EVIDENCE",
    "AgentTools",
    "DocumentView",
    "EvidenceStore",
    "Gateway",
    "IngestReport",
    "OpenDocumentArgs",
    "RetrievalRecord",
    "SearchEvidenceArgs",
    "SearchHit",
    "SearchResult",
    "StoredDocument",
    "ToolSpec",
    "gateway_for_card",
    "memory_store",
    "open_store",
    "read_articles",
    "retrieved_by",
    "unretrieved_citations",
]
