"""The typer application object and helpers shared by the subcommand modules."""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
import typer.core

if TYPE_CHECKING:
    from rich.console import Console

    from worldsim.trace.signing import PublicKey

__all__ = [
    "ExpectHeadOption",
    "JsonOption",
    "PublicKeyOption",
    "SignKeyOption",
    "app",
    "command_group",
    "configure_logging",
    "err_console",
    "escape",
    "fail",
    "interrupted",
    "on_budget",
    "on_interrupt",
    "out_console",
    "stop_on_sigterm",
    "trace_checks",
]

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object, nothing else.")]
"""``--json`` of the commands whose whole report is one JSON object."""

SignKeyOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="Sign the sealed last record of each trace with this Ed25519 private key (PEM, "
        "PKCS#8, unencrypted; see `worldsim keygen`). The key is not recorded, its id is: a "
        "signed run is resumed only with the same key.",
    ),
]
"""``--sign-key``, shared by the commands that write traces."""

ExpectHeadOption = Annotated[
    str | None,
    typer.Option(
        metavar="HASH",
        help="Refuse the trace unless its head (all 64 hex digits) is HASH, e.g. the head "
        "printed by run or recorded in a prereg lock.",
    ),
]
PublicKeyOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="Require the final record to be signed by this Ed25519 public key (PEM).",
    ),
]
"""``--expect-head`` and ``--public-key``: what a trace must be anchored to, shared by the
commands that check one (`trace_checks` reads them)."""


def trace_checks(
    expect_head: str | None, public_key: Path | None
) -> tuple[str | None, PublicKey | None]:
    """The head and the public key a trace must match. A head prefix is refused: a forger who
    may rewrite the chain can grind a head to match 12 or 16 digits, never 64."""
    from worldsim.domain.errors import ConfigError

    head = None
    if expect_head is not None:
        head = expect_head.strip().lower()
        if len(head) != 64 or any(c not in "0123456789abcdef" for c in head):
            raise ConfigError(
                f"{expect_head!r} is not a head: give all 64 hex digits of the SHA-256",
                field="--expect-head",
            )
    key = None
    if public_key is not None:
        from worldsim.trace.signing import load_public_key

        key = load_public_key(public_key)
    return head, key


HELP_WIDTH = 120
"""Help is wrapped at the terminal's width, never narrower than this, and never cut."""


# click's UsageError (a bad or missing flag or argument): typer exports only its BadParameter
# subclass, and recent versions vendor click, so the class is found through it.
_USAGE_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)


class _Group(typer.core.TyperGroup):
    """A command group whose ``--help`` flag defaults to False, whose subcommands report a
    bad flag or argument in one line, like every other input error, and whose help lists each
    subcommand's summary whole.

    Running a subcommand processes its groups' help flags too; typer converts a flag's value
    through a pydantic validator unless it is already a bool, and the default ``None`` is not,
    so ``worldsim run --help`` loaded pydantic only for that. Subcommands need not be changed:
    when their own help flag is unset they run, and running loads pydantic anyway.
    """

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.default = False
        return option

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The subcommands, each with the first sentence of its help in full, wrapped (click
        cuts it to the line with "...")."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _USAGE_ERROR as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # shows the help page
                raise
            fail(exc.format_message(), code=getattr(exc, "exit_code", 2))  # type: ignore[attr-defined]


app = typer.Typer(
    name="worldsim",
    cls=_Group,
    help="Branching, auditable multiverse simulations for forecasting agents, scored offline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help: wrapped, never cut, and rendered without loading rich's markdown stack
    rich_markup_mode=None,
    context_settings={
        "terminal_width": max(shutil.get_terminal_size().columns, HELP_WIDTH),
        "max_content_width": HELP_WIDTH,
        "help_option_names": ["-h", "--help"],
    },
)


def _print_version(value: bool) -> None:
    if value:
        from worldsim.domain.version import version_line

        sys.stdout.write(version_line() + "\n")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        expose_value=False,
        callback=_print_version,
        help="Print the version (and the source revision, in a checkout) and exit.",
    ),
) -> None:
    """Branching, auditable multiverse simulations for forecasting agents, scored offline."""


def command_group(name: str, help: str) -> typer.Typer:
    """A group of subcommands (``worldsim NAME ...``), added to ``app``."""
    group = typer.Typer(cls=_Group, help=help, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group


class _LazyConsole:
    """A rich console made on first use, so that ``--help`` never loads rich."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            stream = sys.stderr if self._stderr else sys.stdout
            # piped output is read by programs and people with wide windows: never cut at 80
            self._console = Console(
                stderr=self._stderr, soft_wrap=True, width=None if stream.isatty() else 160
            )
        return getattr(self._console, name)


out_console: Console = _LazyConsole(stderr=False)  # type: ignore[assignment]
err_console: Console = _LazyConsole(stderr=True)  # type: ignore[assignment]


def escape(text: str) -> str:
    """Escape rich markup in ``text`` (rich is loaded on first use)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def configure_logging(level: int | None = None) -> None:
    """Route structlog to standard error: readable on a terminal, JSON lines otherwise.

    ``level`` is a :mod:`logging` level; warnings and above by default.
    """
    import logging

    import structlog

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
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.WARNING if level is None else level
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def fail(message: str, *, code: int = 2) -> NoReturn:
    """Print a one-line error to standard error and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise SystemExit(code)


_TERMINATED: list[bool] = []
"""Holds True once SIGTERM stopped the command (see :func:`stop_on_sigterm`)."""


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Inside, SIGTERM (a plain ``kill``, a job scheduler's stop) stops the command as Ctrl-C
    does: it is handed to SIGINT's handler of the moment (the event loop's, which cancels the
    run so that it records what was in flight and writes what it owes); :func:`interrupted`
    then says ``terminated``, exit 143. Where the process ignores SIGINT (a background job of a
    shell script) there is no such handler, and SIGTERM ends the process at once, as it would
    without worldsim. For the command line's entry point only: a library never takes a
    process's signals."""

    def stop(signum: int, frame: Any) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
            return
        _TERMINATED.append(True)
        handler(signal.SIGINT, frame)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted(left: str | None = None) -> NoReturn:
    """End a command that Ctrl-C (exit 130) or SIGTERM (exit 143) stopped, with one line and
    ``left``: what it left unfinished and how to finish it."""
    said, code = ("terminated", 143) if _TERMINATED else ("interrupted", 130)
    fail(said if left is None else f"{said}: {left}", code=code)


@contextlib.contextmanager
def on_interrupt(left: Callable[[], str]) -> Iterator[None]:
    """Ctrl-C or SIGTERM inside ends the command with one line, ``left()`` (what it left
    unfinished and how to finish it), and exit 130 (143 for SIGTERM)."""
    try:
        yield
    except KeyboardInterrupt:
        interrupted(left())


@contextlib.contextmanager
def on_budget(then: str | Callable[[], str]) -> Iterator[None]:
    """A budget stop inside ends its one line with ``then`` (or what ``then()`` says once it
    stopped): what goes on with a higher budget (a run's resume, a forecast's new start)."""
    from worldsim.domain.errors import BudgetExhausted

    try:
        yield
    except BudgetExhausted as exc:
        said = then if isinstance(then, str) else then()
        raise type(exc)(f"{exc.message}{said}", call=exc.call) from None
