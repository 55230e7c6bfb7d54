"""worldsim: branching, auditable multiverse simulations for forecasting agents.

The public surface: load a card and a policy, run it, read, replay and verify its trace, and
plug in roles; run a whole study with ``Experiment``. Everything else lives in the submodules
named after the data's path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worldsim.domain.lazy import lazy_exports

if TYPE_CHECKING:
    from worldsim.domain.cards import Card, load_card
    from worldsim.domain.collector import collector_paced
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
    from worldsim.domain.labels import Label, load_label
    from worldsim.domain.policy import BranchPolicy, load_policy
    from worldsim.domain.version import __version__
    from worldsim.roles.registry import register_role, registered_roles
    from worldsim.sim.session import run_card
    from worldsim.sim.settlement import RunResult
    from worldsim.study.experiment import Experiment
    from worldsim.trace import Trace, read_trace
    from worldsim.trace.replay import ReplayResult
    from worldsim.trace.verify import Verification, canonical_hash, replay, verify_trace
    from worldsim.world.extraction import EXTRACTION_RULES, Leaf, extract
    from worldsim.world.moves import BranchCandidate, Proposal, Report, Review
    from worldsim.world.state import WorldState
    from worldsim.world.views import ReviewContext, TickBatch, TickContext

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BranchCandidate": "worldsim.world.moves",
        "BranchPolicy": "worldsim.domain.policy",
        "BudgetExhausted": "worldsim.domain.errors",
        "Card": "worldsim.domain.cards",
        "CardError": "worldsim.domain.errors",
        "ConfigError": "worldsim.domain.errors",
        "EXTRACTION_RULES": "worldsim.world.extraction",
        "Experiment": "worldsim.study.experiment",
        "Label": "worldsim.domain.labels",
        "Leaf": "worldsim.world.extraction",
        "ModelError": "worldsim.domain.errors",
        "PolicyError": "worldsim.domain.errors",
        "Proposal": "worldsim.world.moves",
        "ReplayResult": "worldsim.trace.replay",
        "Report": "worldsim.world.moves",
        "Review": "worldsim.world.moves",
        "ReviewContext": "worldsim.world.views",
        "RoleError": "worldsim.domain.errors",
        "ModelConfig": "worldsim.domain.config",
        "RunConfig": "worldsim.domain.config",
        "RunResult": "worldsim.sim.settlement",
        "StateError": "worldsim.domain.errors",
        "TickBatch": "worldsim.world.views",
        "TickContext": "worldsim.world.views",
        "Trace": "worldsim.trace",
        "TraceError": "worldsim.domain.errors",
        "Verification": "worldsim.trace.verify",
        "WorldState": "worldsim.world.state",
        "WorldsimError": "worldsim.domain.errors",
        "WorldsimRuntimeError": "worldsim.domain.errors",
        "__version__": "worldsim.domain.version",
        "canonical_hash": "worldsim.trace.verify",
        "collector_paced": "worldsim.domain.collector",
        "extract": "worldsim.world.extraction",
        "load_card": "worldsim.domain.cards",
        "load_label": "worldsim.domain.labels",
        "load_policy": "worldsim.domain.policy",
        "read_trace": "worldsim.trace",
        "register_role": "worldsim.roles.registry",
        "registered_roles": "worldsim.roles.registry",
        "replay": "worldsim.trace.verify",
        "run_card": "worldsim.sim.session",
        "verify_trace": "worldsim.trace.verify",
    },
)

__all__ = [
    "EXTRACTION_RULES",
    "BranchCandidate",
    "BranchPolicy",
    "BudgetExhausted",
    "Card",
    "CardError",
    "ConfigError",
    "Experiment",
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
    "TickBatch",
    "TickContext",
    "Trace",
    "TraceError",
    "Verification",
    "WorldState",
    "WorldsimError",
    "WorldsimRuntimeError",
    "__version__",
    "canonical_hash",
    "collector_paced",
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
