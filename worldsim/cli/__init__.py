"""The ``worldsim`` command line: one entry point, subcommands in sibling modules.

This is the only place that configures logging (structlog): console output on a TTY, JSON lines
otherwise, always on standard error so standard output stays clean for ``--json``.
"""

from __future__ import annotations

import sys

import typer

from worldsim.cli._app import app, configure_logging, fail

__all__ = ["app", "main"]

# Each module adds its subcommands to ``app`` when imported.
from worldsim.cli import prereg as _prereg  # noqa: E402,F401
from worldsim.cli import run as _run  # noqa: E402,F401  (registers commands)
from worldsim.cli import score as _score  # noqa: E402,F401


def main() -> None:
    """Console-script entry point."""
    configure_logging()
    try:
        app(standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        fail("aborted", code=130)
    except Exception as exc:  # the last line of defence: one line, no traceback
        from click.exceptions import ClickException

        if isinstance(exc, ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        from worldsim.errors import WorldsimError

        if isinstance(exc, WorldsimError):
            fail(str(exc), code=exc.exit_code)
        raise
