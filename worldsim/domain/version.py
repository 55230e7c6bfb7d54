"""The version of worldsim and the source revision it runs from, recorded in every trace."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["__version__", "git_revision", "version_line"]

__version__ = "0.3.0"

_SOURCE = Path(__file__).resolve().parents[2]
"""The folder worldsim's package sits in: a source checkout, or site-packages."""


def git_revision(root: Path | None = None) -> str | None:
    """The commit of the source checkout at ``root`` (default: the one worldsim runs from),
    a linked work tree included; read from files, no subprocess. ``None`` outside one."""
    dirs = _git_dirs(root if root is not None else _SOURCE)
    if dirs is None:
        return None
    own, common = dirs  # HEAD is the work tree's own; refs are shared with the main checkout
    try:
        head = (own / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        name = head[5:]
        for folder in (own, common):
            if (folder / name).is_file():
                return (folder / name).read_text().strip()
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + name):
                    return line.split()[0]
        return None
    except OSError:
        return None


def _git_dirs(root: Path) -> tuple[Path, Path] | None:
    """The git folder of the checkout at ``root`` and the folder its refs live in: the same
    for a main checkout; for a linked work tree (``.git`` a file naming its folder), that folder
    and the main checkout's (its ``commondir``)."""
    dot = root / ".git"
    try:
        if dot.is_dir():
            return dot, dot
        text = dot.read_text().strip() if dot.is_file() else ""
        if not text.startswith("gitdir: "):
            return None
        own = (root / text[8:].strip()).resolve()
        common_file = own / "commondir"
        common = (own / common_file.read_text().strip()).resolve() if common_file.is_file() else own
    except OSError:
        return None
    return own, common


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
    revision = _describe(root if root is not None else _SOURCE)
    return f"worldsim {__version__}" + (f" ({revision})" if revision else "")
