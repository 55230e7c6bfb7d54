"""The typer application object and helpers shared by the subcommand modules."""

from __future__ import annotations

import logging
import sys
from typing import NoReturn

import structlog
import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["app", "configure_logging", "err_console", "fail", "out_console"]

app = typer.Typer(
    name="worldsim",
    help="Branching, auditable multiverse simulations for forecasting agents, scored offline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Piped output is read by programs and people with wide windows: do not cut it at 80 columns.
out_console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, soft_wrap=True, width=None if sys.stderr.isatty() else 160)


def configure_logging(level: int = logging.WARNING) -> None:
    """Route structlog to standard error: readable on a terminal, JSON lines otherwise."""
    renderer: structlog.types.Processor
    if sys.stderr.isatty():
        renderer = structlog.dev.ConsoleRenderer(colors=True)
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def fail(message: str, *, code: int = 2) -> NoReturn:
    """Print a one-line error to standard error and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise SystemExit(code)
