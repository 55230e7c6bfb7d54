"""Branch policies (DESIGN §4.5): caps and thresholds that govern forks, recorded in every trace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    model_serializer,
)
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from worldsim.domain import bounds
from worldsim.domain.errors import PolicyError
from worldsim.domain.files import load_mapping, validated
from worldsim.domain.resources import data_dirs

__all__ = [
    "NEWS_FIELDS",
    "AdaptiveTrigger",
    "BranchPolicy",
    "NewsSettings",
    "known_policies",
    "load_policy",
    "policy_file",
]


class AdaptiveTrigger(BaseModel):
    """Admit a fork only where the timeline's ledger support for the endpoint is weak.

    ``margin = |supports − contradicts| / max(1, supports + contradicts)`` over the scored
    endpoints' evidence entries so far, which the trace records; a fork is admitted only when
    ``margin ≤ max_margin``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    feature: Literal["ledger_support_margin"] = "ledger_support_margin"
    max_margin: StrictFloat = Field(0.4, ge=0.0, le=1.0)


class BranchPolicy(BaseModel):
    """Caps and thresholds that govern forks.

    Numbers are strict (a boolean is not a count) and bounded (docs/limits.md): ``max_active``
    caps the timelines of a run, so it is also the bound the trace-size estimate uses.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=120, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = Field("", max_length=bounds.MAX_TEXT_CHARS)
    max_depth: StrictInt = Field(0, ge=0, le=bounds.MAX_DEPTH)
    max_active: StrictInt = Field(1, ge=1, le=bounds.MAX_ACTIVE)
    max_branches_per_tick: StrictInt = Field(0, ge=0, le=bounds.MAX_ACTIVE)
    branch_threshold: StrictFloat = Field(0.999, ge=0.0, le=1.0)
    runway_ticks: StrictInt = Field(0, ge=0, le=bounds.MAX_TICKS)
    candidate_endpoints_only: StrictBool = True
    ticks: StrictInt | None = Field(None, ge=1, le=bounds.MAX_TICKS)
    on_reject: Literal["sample", "drop"] = Field(
        "sample",
        description=(
            "what a rejected candidate does to its timeline: 'sample' draws whether the hypothesis "
            "comes true with its probability (keeps p_yes unbiased), 'drop' ignores it"
        ),
    )
    adaptive: AdaptiveTrigger | None = None
    roles: tuple[str, ...] = Field(
        (), description="roles added to every run under this policy (see `worldsim roles`)"
    )
    max_news: StrictInt | None = Field(
        None,
        ge=0,
        le=bounds.MAX_NEWS,
        description="a continued run reads at most this many documents of news (default 20)",
    )
    prune_below: StrictFloat | None = Field(
        None,
        ge=0.0,
        lt=1.0,
        description=(
            "a continued run's particle whose re-weighted mass falls below this is pruned: it "
            "keeps mass 0 as a leaf (default 0: none is)"
        ),
    )
    news_strength: StrictFloat | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description=(
            "kappa of the offline assessor's rule: how far one document's stance moves a "
            "particle's likelihood (default 0.5)"
        ),
    )

    @model_serializer(mode="wrap")
    def _news_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """The news fields are written only when set, so a policy without them records
        exactly what it did before they existed (and canonical hashes do not move)."""
        data: dict[str, object] = handler(self)
        for name in NEWS_FIELDS:
            if data.get(name, 0) is None:
                del data[name]
        return data

    @property
    def news(self) -> NewsSettings:
        """The news settings of a continued run, defaults filled in."""
        return NewsSettings(
            max_news=20 if self.max_news is None else self.max_news,
            prune_below=0.0 if self.prune_below is None else self.prune_below,
            strength=0.5 if self.news_strength is None else self.news_strength,
        )


NEWS_FIELDS = ("max_news", "prune_below", "news_strength")


@dataclass(frozen=True, slots=True)
class NewsSettings:
    """How a continued run reads its news and re-weights its particles (docs/concepts.md)."""

    max_news: int
    prune_below: float
    strength: float


def known_policies() -> dict[str, Path]:
    """Policy presets by name; a project-local ``policies/`` folder overrides the bundled ones."""
    found: dict[str, Path] = {}
    for folder in reversed(data_dirs("policies")):
        for path in sorted(folder.glob("*.yaml")):
            found[path.stem] = path
    return found


def policy_file(name_or_path: str | Path) -> Path | None:
    """The file ``name_or_path`` names as a policy file (a YAML or JSON name, or a path that
    exists); None for a preset's name."""
    path = Path(name_or_path)
    return path if path.suffix in {".yaml", ".yml", ".json"} or path.exists() else None


def load_policy(name_or_path: str | Path) -> BranchPolicy:
    """Load a preset by name or a policy file by path."""
    text = str(name_or_path)
    path = Path(text)
    if policy_file(text) is None:
        presets = known_policies()
        if text not in presets:
            known = ", ".join(sorted(presets)) or "none"
            raise PolicyError(f"unknown policy '{text}' (known: {known})", field="policy")
        path = presets[text]
    data = load_mapping(path, what="policy", error=PolicyError)
    data.setdefault("name", path.stem)
    return validated(BranchPolicy, data, file=path, error=PolicyError)
