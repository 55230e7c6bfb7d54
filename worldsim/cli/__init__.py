"""The ``worldsim`` command line: one entry point, subcommands in sibling modules.

This is the only place that configures logging (structlog): console output on a TTY, JSON lines
otherwise, always on standard error so standard output stays clean for ``--json``.
"""

from __future__ import annotations

import sys

from worldsim.cli._app import app, configure_logging, fail
from worldsim.domain.errors import WorldsimError

__all__ = ["app", "main"]

# Each module adds its subcommands to ``app`` when imported.
from worldsim.cli import forecast as _forecast  # noqa: F401
from worldsim.cli import gateway as _gateway  # noqa: F401
from worldsim.cli import hindsight as _hindsight  # noqa: F401
from worldsim.cli import prereg as _prereg  # noqa: F401
from worldsim.cli import run as _run  # noqa: F401
from worldsim.cli import score as _score  # noqa: F401


def main() -> None:
    """Console-script entry point: worldsim errors become one line on stderr, no traceback."""
    if not {"-h", "--help"} & set(sys.argv[1:]):  # help needs no logging (nor structlog)
        configure_logging()
    try:
        app()
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
