"""worldsim: branching, auditable multiverse simulations for forecasting agents.

The public surface: load a card and a policy, run it, read, replay and verify its trace, and
plug in roles. Everything else lives in the submodules named after the data's path.
"""

from __future__ import annotations

__version__ = "0.1.0"

from worldsim.cards import Card, Label, load_card, load_label
from worldsim.engine import RunConfig, RunResult, run_card
from worldsim.errors import (
    BudgetExhausted,
    CardError,
    ConfigError,
    ModelError,
    PolicyError,
    RoleError,
    StateError,
    TraceError,
    WorldsimError,
    WorldsimRuntimeError,
)
from worldsim.extraction import EXTRACTION_RULES, Leaf, extract
from worldsim.policy import BranchPolicy, load_policy
from worldsim.replay import ReplayResult, replay
from worldsim.roles import (
    BranchCandidate,
    Proposal,
    Report,
    Review,
    ReviewContext,
    TickContext,
    register_role,
    registered_roles,
)
from worldsim.state import WorldState
from worldsim.trace import Trace, read_trace
from worldsim.trace.canonical import canonical_hash
from worldsim.verify import Verification, verify_trace

__all__ = [
    "EXTRACTION_RULES",
    "BranchCandidate",
    "BranchPolicy",
    "BudgetExhausted",
    "Card",
    "CardError",
    "ConfigError",
    "Label",
    "Leaf",
    "ModelError",
    "PolicyError",
    "Proposal",
    "ReplayResult",
    "Report",
    "Review",
    "ReviewContext",
    "RoleError",
    "RunConfig",
    "RunResult",
    "StateError",
    "TickContext",
    "Trace",
    "TraceError",
    "Verification",
    "WorldState",
    "WorldsimError",
    "WorldsimRuntimeError",
    "__version__",
    "canonical_hash",
    "extract",
    "load_card",
    "load_label",
    "load_policy",
    "read_trace",
    "register_role",
    "registered_roles",
    "replay",
    "run_card",
    "verify_trace",
]
