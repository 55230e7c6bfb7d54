"""The viewer's part of a continued run: its parent, news and re-weighting, and the
forecast's path across dates (docs/viewer.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldsim.scoring.attribution import forecast_path
from worldsim.trace.reader import TraceLine

__all__ = ["continuation"]


def continuation(effective: list[TraceLine], path: Path) -> dict[str, Any] | None:
    """A continued run's parent, news and re-weighting, and the forecast's path across dates:
    each ancestor's date and p_yes, oldest first (read through the verify gate, each at the
    head its child names; an ancestor not found ends the path there)."""
    started = effective[0].fields if effective else {}
    ref = started.get("parent")
    if ref is None:
        return None
    weights = next((line.fields for line in effective if line.type == "reweighting"), None)
    extraction = next((line.fields for line in effective if line.type == "extraction"), None)
    here = {
        "date": ref["as_of"],
        "p_yes": extraction.get("p_yes") if extraction else None,
        "file": path.name,
    }
    return {
        "parent": ref,
        "news": [line.fields for line in effective if line.type == "news"],
        "reweighting": weights,
        "path": [*forecast_path(path, ref), here],
    }
