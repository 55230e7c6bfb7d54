"""Where worldsim finds its bundled data (roles, policies) and a project's local overrides."""

from __future__ import annotations

from pathlib import Path

__all__ = ["data_dirs"]

_PACKAGE = Path(__file__).resolve().parent.parent  # the worldsim package


def data_dirs(kind: str) -> list[Path]:
    """Folders holding ``kind`` data ("agents" or "policies"), highest precedence first.

    The current directory's folder comes first so a project can override or extend the bundled
    files by name; then the copy bundled in the wheel, or the source checkout's folder.
    """
    candidates = [
        Path.cwd() / kind,
        _PACKAGE / "_bundled" / kind,
        _PACKAGE.parent / kind,
    ]
    seen: list[Path] = []
    for folder in candidates:
        resolved = folder.resolve()
        if resolved.is_dir() and resolved not in seen:
            seen.append(resolved)
    return seen
