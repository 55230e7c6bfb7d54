"""The in-memory store runs on the event loop and answers as the aiosqlite file store does."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.strategies import EPOCH, documents, texts
from worldsim.domain.cards import EvidenceDoc
from worldsim.gateway import memory_store, open_store

asks = st.lists(
    st.tuples(texts, st.integers(1, 8), st.integers(-(10**6), 10**6 + 1)), min_size=1, max_size=5
)


async def _answers(
    docs: list[EvidenceDoc], asked: list[tuple[str, int, int]], file: Path | None
) -> list[object]:
    """Every search (hits with scores and snippets) and every document, from one store."""
    if file is None:
        opened = memory_store(docs)
    else:
        async with open_store(file, create=True) as store:
            await store.add(docs)
        opened = open_store(file)
    async with opened as store:
        found: list[object] = []
        for _ in range(2):  # the second time from the store's memory
            found += [
                await store.search(query, before=EPOCH + timedelta(seconds=at), k=k)
                for query, k, at in asked
            ]
            found += [await store.get(d.id) for d in docs] + [await store.get("missing")]
        assert found[: len(found) // 2] == found[len(found) // 2 :]
        found += [await store.documents(), await store.count()]
        return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=documents, asked=asks)
def test_the_loop_store_ranks_and_cuts_off_as_the_file_store(
    docs: list[EvidenceDoc],
    asked: list[tuple[str, int, int]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Same hits, order, BM25 scores, snippets and strict cutoff, same documents."""
    file = tmp_path_factory.mktemp("store") / "evidence.db"
    on_loop = asyncio.run(_answers(docs, asked, None))
    on_thread = asyncio.run(_answers(docs, asked, file))
    assert on_loop == on_thread


def test_searches_run_on_the_loop_and_yield_to_other_agents_in_a_fixed_order() -> None:
    """No statement leaves the loop's thread, and each is a checkpoint: two agents searching
    and reading alternate, the same way every time."""
    docs = [
        EvidenceDoc(id="a", published_at=EPOCH, title="Merger review", text="the merger review")
    ]

    async def main() -> tuple[list[str], set[int]]:
        order: list[str] = []
        threads: set[int] = set()
        async with memory_store(docs) as store:
            real = store._db.execute

            def spy(sql: str, parameters: object = ()) -> object:
                threads.add(threading.get_ident())
                return real(sql, parameters)  # type: ignore[arg-type]

            store._db.execute = spy  # type: ignore[method-assign]

            async def agent(name: str) -> None:
                for _ in range(3):
                    await store.search("merger", before=EPOCH + timedelta(days=1))
                    await store.get("a")
                    order.append(name)
                    await store.get("a")
                    order.append(name)

            async with anyio.create_task_group() as tg:
                tg.start_soon(agent, "x")
                tg.start_soon(agent, "y")
        return order, threads

    orders = set()
    for _ in range(3):
        order, threads = anyio.run(main)
        assert threads == {threading.get_ident()}
        orders.add(tuple(order))
    assert orders == {("x", "y") * 6}


@pytest.mark.asyncio
async def test_adding_documents_forgets_the_answers_given() -> None:
    """A search or a read answered before an addition is asked of the database again."""
    first = EvidenceDoc(id="a", published_at=EPOCH, title="Merger review", text="merger")
    later = EvidenceDoc(id="b", published_at=EPOCH, title="Merger approved", text="merger merger")
    cutoff = EPOCH + timedelta(days=1)
    async with memory_store([first]) as store:
        assert [h.id for h in await store.search("merger", before=cutoff)] == ["a"]
        assert await store.get("b") is None
        await store.add([later])
        assert [h.id for h in await store.search("merger", before=cutoff)] == ["b", "a"]
        got = await store.get("b")
        assert got is not None and got.title == "Merger approved"


@pytest.mark.asyncio
async def test_a_batch_answers_alike_when_its_new_questions_push_old_ones_out_of_memory() -> None:
    """The store remembers a bounded number of questions: a batch whose new ones push out one
    it asks again (answered from memory when the batch began) still answers every question as
    a store that never forgot would."""
    doc = EvidenceDoc(id="a", published_at=EPOCH, title="Merger review", text="merger review")
    cutoff = EPOCH + timedelta(days=1)
    many = [f"merger q{i}" for i in range(1 << 16)]  # as many as the store remembers
    async with memory_store([doc]) as store:
        await store.search_many(many, before=cutoff)
        batch = ["review w1", many[0], "review w2", many[1]]
        answers = await store.search_many(batch, before=cutoff)
    async with memory_store([doc]) as fresh:
        expected = await fresh.search_many(batch, before=cutoff)
    assert answers == expected and all(answers)
