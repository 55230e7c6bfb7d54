"""A run's requests do not depend on when its answers arrive.

The same card, policy and seed against two servers that answer the same requests alike but
after different waits (so concurrent answers arrive in other orders) send the same requests,
site by site, and end with the same canonical hash: what an agent or the reviewer is asked is
made from the state committed before the tick and the tick's answers in canonical order, never
from the order they came in. (A forked timeline's citation checks, which could depend on how far
its parent has run, are bounded by the fork: tests/gateway/test_access_index.py.)
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support import run_on_stub
from worldsim.testing.stub_server import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace


def _requests(jitter_seed: int, out: Path) -> tuple[Counter[tuple[object, ...]], str | None]:
    with StubServer(content_by_request=True, jitter_s=0.08, jitter_seed=jitter_seed) as server:
        done = run_on_stub(
            server.base_url, out, "--policy", "branching", "--seed", "2", "--ticks", "6"
        )
    assert done.returncode == 0, done.stderr
    (trace,) = out.glob("*.jsonl")
    sites = Counter(
        (c.data.timeline, c.data.tick, c.data.role, c.data.agent, c.data.index, c.data.request_hash)
        for c in read_trace(trace).of_type("llm_call")
    )
    return sites, verify_trace(trace, canonical=True).canonical


@pytest.mark.parametrize("other_seed", [2, 3])
def test_answers_arriving_in_another_order_change_no_request(
    tmp_path: Path, other_seed: int
) -> None:
    first, first_hash = _requests(1, tmp_path / "a")
    second, second_hash = _requests(other_seed, tmp_path / "b")
    assert sum(first.values()) > 10  # the tick's agents are asked concurrently
    assert first == second
    assert first_hash == second_hash
