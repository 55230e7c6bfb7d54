"""LLM-backed roles: prompts from ``agents/``, bounded outputs, conversion to engine types."""

from __future__ import annotations

from worldsim.llm.roles import (
    LLMActor,
    LLMCohort,
    LLMGovernance,
    LLMInitializer,
    LLMReporter,
    LLMRole,
    llm_role,
)

__all__ = [
    "LLMActor",
    "LLMCohort",
    "LLMGovernance",
    "LLMInitializer",
    "LLMReporter",
    "LLMRole",
    "llm_role",
]
