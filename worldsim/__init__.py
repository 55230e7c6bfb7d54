"""worldsim: branching, auditable multiverse simulations for forecasting agents.

The public surface: load a card and a policy, run it, read, replay and verify its trace, and
plug in roles. Everything else lives in the submodules named after the data's path.
"""

from __future__ import annotations

from worldsim.domain.cards import Card, Label, load_card, load_label
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.errors import (
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
from worldsim.domain.policy import BranchPolicy, load_policy
from worldsim.domain.version import __version__
from worldsim.roles.registry import register_role, registered_roles
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult
from worldsim.trace import Trace, read_trace
from worldsim.trace.canonical import canonical_hash
from worldsim.trace.replay import ReplayResult, replay
from worldsim.trace.verify import Verification, verify_trace
from worldsim.world.extraction import EXTRACTION_RULES, Leaf, extract
from worldsim.world.moves import BranchCandidate, Proposal, Report, Review
from worldsim.world.state import WorldState
from worldsim.world.views import ReviewContext, TickContext

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
    "ModelConfig",
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
