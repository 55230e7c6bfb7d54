"""The Temporal Gateway: a dated evidence store and the cutoff-bound tools agents search it with.

See ``docs/gateway.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worldsim.domain.lazy import lazy_exports

if TYPE_CHECKING:
    from worldsim.gateway.access import RetrievalRecord
    from worldsim.gateway.articles import read_articles
    from worldsim.gateway.documents import IngestReport, SearchHit, StoredDocument
    from worldsim.gateway.gateway import (
        DocumentView,
        Gateway,
        SearchResult,
        check_evidence,
        gateway_for_card,
        retrieved_by,
        unretrieved_citations,
    )
    from worldsim.gateway.store import EvidenceStore, memory_store, open_store
    from worldsim.gateway.tools import (
        GATEWAY_TOOLS,
        OPEN_DOCUMENT,
        SEARCH_EVIDENCE,
        AgentTools,
        OpenDocumentArgs,
        SearchEvidenceArgs,
        ToolSpec,
        batch_of_one,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AgentTools": "worldsim.gateway.tools",
        "DocumentView": "worldsim.gateway.gateway",
        "EvidenceStore": "worldsim.gateway.store",
        "GATEWAY_TOOLS": "worldsim.gateway.tools",
        "Gateway": "worldsim.gateway.gateway",
        "IngestReport": "worldsim.gateway.documents",
        "OPEN_DOCUMENT": "worldsim.gateway.tools",
        "OpenDocumentArgs": "worldsim.gateway.tools",
        "RetrievalRecord": "worldsim.gateway.access",
        "SEARCH_EVIDENCE": "worldsim.gateway.tools",
        "SearchEvidenceArgs": "worldsim.gateway.tools",
        "SearchHit": "worldsim.gateway.documents",
        "SearchResult": "worldsim.gateway.gateway",
        "StoredDocument": "worldsim.gateway.documents",
        "ToolSpec": "worldsim.gateway.tools",
        "batch_of_one": "worldsim.gateway.tools",
        "check_evidence": "worldsim.gateway.gateway",
        "gateway_for_card": "worldsim.gateway.gateway",
        "memory_store": "worldsim.gateway.store",
        "open_store": "worldsim.gateway.store",
        "read_articles": "worldsim.gateway.articles",
        "retrieved_by": "worldsim.gateway.gateway",
        "unretrieved_citations": "worldsim.gateway.gateway",
    },
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
    "batch_of_one",
    "check_evidence",
    "gateway_for_card",
    "memory_store",
    "open_store",
    "read_articles",
    "retrieved_by",
    "unretrieved_citations",
]
