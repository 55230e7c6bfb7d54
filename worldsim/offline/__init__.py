"""The embedded offline model: seeded rule-based answers for every simulation output schema.

:class:`OfflineModel` is the ``offline`` route; the modules beside it hold its rules (actors and
cohorts, governance, the reporter), documented in docs/offline-model.md.
"""

from __future__ import annotations

from worldsim.offline.model import OfflineModel

__all__ = ["OfflineModel"]
