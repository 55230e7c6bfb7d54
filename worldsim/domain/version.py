"""The version of worldsim and the source revision it runs from, recorded in every trace."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["__version__", "git_revision", "version_line"]

__version__ = "0.3.0"


def git_revision() -> str | None:
    """The source checkout's commit, when worldsim runs from one; read from files, no subprocess."""
    root = Path(__file__).resolve().parents[2] / ".git"
    try:
        head = (root / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = root / head[5:]
            if ref.is_file():
                return ref.read_text().strip()
            packed = root / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + head[5:]):
                        return line.split()[0]
            return None
        return head
    except OSError:
        return None


def _describe(root: Path) -> str | None:
    """``git describe --always --dirty`` of the checkout at ``root``; ``None`` outside one or
    without git."""
    if not (root / ".git").exists():  # a folder, or a file in a linked work tree
        return None
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    described = done.stdout.strip()
    return described if done.returncode == 0 and described else None


def version_line(root: Path | None = None) -> str:
    """What ``worldsim --version`` prints: the version and, when worldsim runs from a source
    checkout (``root``, default the one this file is in), the revision ``git describe`` gives."""
    revision = _describe(root if root is not None else Path(__file__).resolve().parents[2])
    return f"worldsim {__version__}" + (f" ({revision})" if revision else "")
