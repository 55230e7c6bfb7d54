"""LLM-backed roles: prompts from ``agents/``, bounded outputs, conversion to engine types."""

from __future__ import annotations

from worldsim.llm.roles import (
    BUILTIN_LLM_ROLES,
    LLMActor,
    LLMCohort,
    LLMGovernance,
    LLMInitializer,
    LLMReporter,
    LLMRole,
    llm_role,
)

__all__ = [
    "BUILTIN_LLM_ROLES",
    "LLMActor",
    "LLMCohort",
    "LLMGovernance",
    "LLMInitializer",
    "LLMReporter",
    "LLMRole",
    "llm_role",
]
