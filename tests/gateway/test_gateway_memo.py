"""A gateway asks its (read-only) store once per distinct search and per document, and answers
the rest from memory: the same results and refusals, and every call still in the access log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldsim.domain.cards import EvidenceDoc
from worldsim.domain.errors import GatewayRefusal
from worldsim.gateway import Gateway, memory_store

BASE = datetime(2026, 3, 1, tzinfo=UTC)
DOCS = [
    EvidenceDoc(
        id=f"d{i}",
        published_at=BASE + timedelta(days=i - 3),
        title=f"{word} report {i}",
        text=f"{word} beta gamma",
    )
    for i, word in enumerate(["alpha", "beta", "gamma", "alpha", "delta", "alpha"])
]
QUERIES = st.sampled_from(["alpha", "beta report", "gamma", "nothing here"])
OPENS = st.sampled_from([d.id for d in DOCS] + ["nonesuch"])


async def _answers(gateway: Gateway, calls: list[tuple[str, Any]]) -> list[Any]:
    answers: list[Any] = []
    for kind, arg in calls:
        if kind == "search":
            answers.append([r.id for r in await gateway.search(arg, k=3, agent="a")])
        else:
            try:
                answers.append((await gateway.open_document(arg, agent="a")).id)
            except GatewayRefusal as exc:
                answers.append(("refused", exc.message))
    return answers


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.just("search"), QUERIES) | st.tuples(st.just("open"), OPENS), max_size=25)
)
def test_remembered_answers_are_the_stores_and_every_call_is_logged(
    calls: list[tuple[str, Any]],
) -> None:
    async def check() -> None:
        async with memory_store(DOCS) as store:
            asked = {"search": 0, "get": 0}
            search, get = store.search, store.get

            async def counted_search(*args: Any, **kwargs: Any) -> Any:
                asked["search"] += 1
                return await search(*args, **kwargs)

            async def counted_get(*args: Any, **kwargs: Any) -> Any:
                asked["get"] += 1
                return await get(*args, **kwargs)

            store.search = counted_search  # type: ignore[method-assign]
            store.get = counted_get  # type: ignore[method-assign]
            remembering = Gateway(store, cutoff=BASE)
            got = await _answers(remembering, calls)
            # a fresh gateway per call never remembers anything: the reference answers
            expected = [(await _answers(Gateway(store, cutoff=BASE), [c]))[0] for c in calls]
            assert got == expected
            assert len(remembering.access_log) == len(calls)
            searches = {arg for kind, arg in calls if kind == "search"}
            opened = {arg for kind, arg in calls if kind == "open"}
            # the reference gateways asked once per call; the remembering one once per distinct
            n_search = sum(kind == "search" for kind, _ in calls)
            assert asked["search"] == n_search + len(searches)
            assert asked["get"] == (len(calls) - n_search) + len(opened)

    anyio.run(check)


def test_the_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("worldsim.gateway.gateway.MEMO_SIZE", 2)

    async def check() -> int:
        async with memory_store(DOCS) as store:
            asked = 0
            search = store.search

            async def counted(*args: Any, **kwargs: Any) -> Any:
                nonlocal asked
                asked += 1
                return await search(*args, **kwargs)

            store.search = counted  # type: ignore[method-assign]
            gateway = Gateway(store, cutoff=BASE)
            for query in ("alpha", "beta", "gamma", "beta", "alpha"):
                await gateway.search(query)
            return asked

    # beta is still remembered; alpha was the oldest of three and is asked again
    assert anyio.run(check) == 4
