"""A switch that forbids network access beyond loopback, for test suites.

While active, connecting a socket to any address other than ``127.0.0.0/8``, ``::1``,
``localhost`` or a Unix socket raises `NetworkBlockedError`. Wire it into pytest from a
``conftest.py``::

    @pytest.fixture(autouse=True, scope="session")
    def _no_network() -> Iterator[None]:
        with block_network():
            yield
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["NetworkBlockedError", "block_network", "is_loopback_address"]

_lock = threading.Lock()
_depth = 0
_saved: dict[str, Callable[..., Any]] = {}


class NetworkBlockedError(RuntimeError):
    """A test tried to reach a non-loopback address."""


def is_loopback_address(address: object) -> bool:
    """Whether a socket address stays on this machine."""
    if isinstance(address, str | bytes):
        return True  # a Unix socket path
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(address: object) -> None:
    raise NetworkBlockedError(f"network access to {address!r} is blocked in tests")


def _install() -> None:
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_create_connection = socket.create_connection
    _saved.update(
        connect=original_connect,
        connect_ex=original_connect_ex,
        create_connection=original_create_connection,
    )

    def connect(self: socket.socket, address: Any) -> None:
        if not is_loopback_address(address):
            _refuse(address)
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not is_loopback_address(address):
            _refuse(address)
        return original_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not is_loopback_address(address):
            _refuse(address)
        return original_create_connection(address, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    socket.create_connection = create_connection


def _uninstall() -> None:
    socket.socket.connect = _saved.pop("connect")  # type: ignore[method-assign]
    socket.socket.connect_ex = _saved.pop("connect_ex")  # type: ignore[method-assign]
    socket.create_connection = _saved.pop("create_connection")


@contextmanager
def block_network() -> Iterator[None]:
    """Block non-loopback connections inside the ``with`` block (nesting is allowed)."""
    global _depth
    with _lock:
        if _depth == 0:
            _install()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _uninstall()
