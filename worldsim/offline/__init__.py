"""The embedded offline model: seeded rule-based implementations of every built-in role.

Importing this package registers ``initializer``, ``actor``, ``cohort``, ``governance`` and
``reporter``. The model is documented in docs/offline-model.md.
"""

from __future__ import annotations

from worldsim.offline.agents import OfflineActor, OfflineCohort
from worldsim.offline.governance import OfflineGovernance, branch_score
from worldsim.offline.initializer import OfflineInitializer
from worldsim.offline.reporter import OfflineReporter
from worldsim.world.build import (
    build_world,
    generic_seeds,
    tick_dates,
    tick_of,
)

__all__ = [
    "OfflineActor",
    "OfflineCohort",
    "OfflineGovernance",
    "OfflineInitializer",
    "OfflineReporter",
    "branch_score",
    "build_world",
    "generic_seeds",
    "tick_dates",
    "tick_of",
]
