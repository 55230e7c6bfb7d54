"""The version of worldsim and the source revision it runs from, recorded in every trace."""

from __future__ import annotations

from pathlib import Path

__all__ = ["__version__", "git_revision"]

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
