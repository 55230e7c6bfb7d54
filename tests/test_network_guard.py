"""The suite-wide guard: nothing in the tests can reach beyond loopback."""

from __future__ import annotations

import socket

import pytest

from worldsim.testing.network_guard import NetworkBlockedError


def test_a_public_address_is_refused() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("203.0.113.7", 443), timeout=1)


def test_loopback_stays_open() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        client = socket.create_connection(server.getsockname(), timeout=1)
        try:
            assert client.getpeername() == server.getsockname()
        finally:
            client.close()
    finally:
        server.close()
