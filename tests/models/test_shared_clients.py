"""Runs on one event loop share their HTTP clients; whoever made them closes them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support import DEMO_CARD, invoke
from worldsim.domain.config import ModelConfig
from worldsim.models.pool import HttpClients, Shared
from worldsim.models.routes import parse_route
from worldsim.sim.session import build_pool
from worldsim.testing import StubServer
from worldsim.trace.verify import verify_trace


def test_pools_borrow_one_client_per_route_and_never_close_it() -> None:
    environ = {"STUB_API_KEY": "k1", "STUB_BASE_URL": "http://127.0.0.1:9/v1"}
    models = ModelConfig(model="stub/m", cache="off")
    route = parse_route("stub/m")

    async def main() -> None:
        clients = HttpClients()
        first = build_pool(models, None, environ=environ, shared=Shared(clients=clients))
        second = build_pool(models, None, environ=environ, shared=Shared(clients=clients))
        own = build_pool(models, None, environ=environ)
        for pool in (first, second, own):
            pool.for_route(route)
        borrowed = first.client(route).client  # type: ignore[union-attr]
        assert second.client(route).client is borrowed  # type: ignore[union-attr]
        made = own.client(route).client  # type: ignore[union-attr]
        assert made is not borrowed
        assert len(clients) == 1
        await first.aclose()
        await second.aclose()
        assert not borrowed.is_closed()
        await clients.aclose()
        assert borrowed.is_closed() and len(clients) == 0
        await own.aclose()
        assert made.is_closed()  # a pool closes the clients it made itself

    anyio.run(main)


def test_the_replicates_of_a_run_share_their_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one connection allowed, three replicates send every request on one TCP
    connection: the second and third replicates reuse the first one's client."""
    with StubServer(seed=2) as server:
        monkeypatch.setenv("STUB_API_KEY", "sk-test-key-000")
        monkeypatch.setenv("STUB_BASE_URL", server.base_url)
        done = invoke(
            "run", DEMO_CARD, "--model", "stub/test-model", "--replicates", "3", "--ticks", "1",
            "--max-connections", "1", "--cache", "off", "--out", tmp_path, "--json",
        )  # fmt: skip
        assert done.code == 0, done.err
        connections = {r.connection for r in server.requests}
    traces = sorted(tmp_path.glob("*.jsonl"))
    assert len(traces) == 3 and all(verify_trace(t).exit_code == 0 for t in traces)
    assert len(connections) == 1 and "" not in connections
