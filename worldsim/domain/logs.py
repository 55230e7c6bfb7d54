"""worldsim's loggers, which leave logging to the program that calls worldsim.

A program that has configured structlog (the ``worldsim`` command does, in
:func:`worldsim.cli._app.configure_logging`) gets worldsim's events through its configuration.
A program that has not gets them through the standard library's :mod:`logging`, under the
module's name: warnings and errors reach standard error by Python's last-resort handler until
the program configures :mod:`logging`, and nothing reaches standard output. (structlog's own
default would print every event, ``info`` included, on standard output.)
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["get_logger"]


class _Logger:
    """A logger that asks, at each event, whether the program has configured structlog."""

    __slots__ = ("_name", "_plain")

    def __init__(self, name: str) -> None:
        self._name = name
        self._plain: Any = None

    def __getattr__(self, method: str) -> Any:
        if structlog.is_configured():
            return getattr(structlog.get_logger(self._name), method)
        if self._plain is None:
            self._plain = structlog.wrap_logger(
                logging.getLogger(self._name),
                processors=[structlog.processors.KeyValueRenderer(key_order=["event"])],
                wrapper_class=structlog.stdlib.BoundLogger,
            )
        return getattr(self._plain, method)


def get_logger(name: str) -> Any:
    """The logger of module ``name`` (``get_logger(__name__)``)."""
    return _Logger(name)
