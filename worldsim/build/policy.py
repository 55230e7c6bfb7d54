"""The quality gates of the benchmark builder, from ``policies/build/quality.yaml``.

The bundled file holds the defaults (the gates of the WorldReasoner construction); a project's
own ``./policies/build/quality.yaml`` replaces it, and ``--gates FILE`` replaces both.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from worldsim.domain.errors import ConfigError
from worldsim.domain.files import load_model
from worldsim.domain.resources import data_dirs
from worldsim.domain.values import FrozenModel

__all__ = ["GraphGates", "QualityPolicy", "QuestionGates", "load_quality_policy"]

POLICY_FILE = Path("build") / "quality.yaml"


class GraphGates(FrozenModel):
    min_hops_to_outcome: int = Field(3, ge=0)
    min_events: int = Field(10, ge=0)
    min_sources: int = Field(20, ge=0)
    min_edges: int = Field(1, ge=0)
    min_edge_confidence: float = Field(0.6, ge=0.0, le=1.0)
    min_edge_strength: float = Field(0.3, ge=0.0, le=1.0)
    iterations: int = Field(3, ge=1, le=20)


class QuestionGates(FrozenModel):
    min_clarity: float = Field(0.6, ge=0.0, le=1.0)
    min_measurability: float = Field(0.6, ge=0.0, le=1.0)
    min_answerability: float = Field(0.6, ge=0.0, le=1.0)
    duplicate_similarity: float = Field(0.8, gt=0.0, le=1.0)


class QualityPolicy(FrozenModel):
    graph: GraphGates = GraphGates()
    questions: QuestionGates = QuestionGates()


def load_quality_policy(path: str | Path | None = None) -> tuple[QualityPolicy, Path | None]:
    """The gates in ``path``, else the project's or the bundled quality file, and its path."""
    if path is None:
        found = [d / POLICY_FILE for d in data_dirs("policies") if (d / POLICY_FILE).is_file()]
        if not found:
            return QualityPolicy(), None
        path = found[0]
    p = Path(path)
    return load_model(p, QualityPolicy, what="quality policy", error=ConfigError), p
