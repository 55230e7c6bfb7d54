"""The ``worldsim`` command line: one entry point, subcommands in sibling modules.

This is the only place that configures logging (structlog): console output on a TTY, JSON lines
otherwise, always on standard error so standard output stays clean for ``--json``; and the only
place the command sets what is its process's: the collector's pace (`worldsim.domain.collector`)
and SIGTERM, which stops a command as Ctrl-C does.
"""

from __future__ import annotations

import importlib
import sys

from worldsim.cli._app import app, configure_logging, fail, interrupted, stop_on_sigterm
from worldsim.domain.collector import collector_paced
from worldsim.domain.errors import WorldsimError, unwrap_error

__all__ = ["app", "main"]

# Each module adds its subcommands to ``app`` when imported, in this order (help lists them so).
COMMAND_MODULES = (
    "run",
    "batch",
    "trace",
    "roles",
    "forecast",
    "score",
    "gateway",
    "hindsight",
    "prereg",
    "view",
    "keys",
    "models",
    "cache",
    "interop",
    "build",
)
for _name in COMMAND_MODULES:
    importlib.import_module(f"worldsim.cli.{_name}")


def main() -> None:
    """Console-script entry point: worldsim errors become one line on stderr, no traceback."""
    if not {"-h", "--help"} & set(sys.argv[1:]):  # help needs no logging (nor structlog)
        configure_logging()
    try:
        with collector_paced(), stop_on_sigterm():
            app()
    except WorldsimError as exc:
        fail(str(exc), code=exc.exit_code)
    except KeyboardInterrupt:  # a command that leaves work to finish says how (`on_interrupt`)
        interrupted()
    except BaseExceptionGroup as group:  # tasks that failed together: the error they stand for
        found = unwrap_error(group)
        if not isinstance(found, WorldsimError):
            raise
        fail(str(found), code=found.exit_code)
    except OSError as exc:  # a path the system refuses to look at (a name too long, …)
        if exc.filename is None:
            raise
        fail(f"{exc.filename}: {exc.strerror or exc}", code=2)
