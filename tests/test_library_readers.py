"""The library's trace readers, ``worldsim.replay`` and ``worldsim.canonical_hash``, read a
trace through ``verify``'s own pass: a forgery that keeps the hash chain (re-chained and
re-sealed) but that ``verify`` refuses raises ``verify``'s own TraceError from each of them,
given a path or a trace already read, and gives no hash and no replay."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import worldsim
from tests.support import ROOT, forge
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import TraceError
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace

Records = list[dict[str, Any]]
Forgery = Callable[[Path, Path, Path], None]


@pytest.fixture(scope="module")
def other_card_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A branching run of another card than the demo's."""
    config = RunConfig(
        card=load_card(ROOT / "scenarios" / "product-launch.yaml"),
        policy=load_policy("branching"),
        seed=6,
    )
    out = tmp_path_factory.mktemp("other-card")
    return anyio.run(lambda: run_card(config, out, fsync=False)).trace


def _moved_p_yes(source: Path, target: Path, other: Path) -> None:
    """p_yes moved in the extraction and in ``run_completed``, which agree again."""

    def edit(records: Records) -> None:
        for record in records:
            if record["type"] in ("extraction", "run_completed"):
                record["data"]["p_yes"] = 0.91

    forge(source, target, edit)


def _float(spelling: bytes) -> Forgery:
    """A committed tick's mass written as a float JSON has no number for, or none in range."""

    def write(source: Path, target: Path, other: Path) -> None:
        records = [json.loads(raw) for raw in source.read_bytes().splitlines()]
        at = next(i for i, r in enumerate(records) if r["type"] == "tick_committed")
        forge(
            source,
            target,
            lambda records: None,
            respell=at,
            rewrite=lambda raw: re.sub(rb'"mass":[0-9.e-]+', b'"mass":' + spelling, raw, count=1),
        )

    return write


def _other_cards_header(source: Path, target: Path, other: Path) -> None:
    """The run's header replaced by another card's run's (card, card hash and settings)."""
    header = json.loads(other.read_bytes().splitlines()[0])

    def edit(records: Records) -> None:
        records[0]["data"] = header["data"]

    forge(source, target, edit)


FORGERIES: dict[str, Forgery] = {
    "a p_yes moved and re-chained": _moved_p_yes,
    "a NaN": _float(b"NaN"),
    "an Infinity": _float(b"Infinity"),
    "a float beyond range": _float(b"1e400"),
    "another card's header": _other_cards_header,
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
@pytest.mark.parametrize("read", [False, True], ids=["a path", "a trace read"])
def test_library_readers_refuse_what_verify_refuses(
    branching_demo_trace: Path, other_card_trace: Path, tmp_path: Path, forgery: str, read: bool
) -> None:
    forged = tmp_path / "forged.jsonl"
    FORGERIES[forgery](branching_demo_trace, forged, other_card_trace)
    held = read_trace(forged)  # the chain holds: a reader of the chain alone takes it
    assert held.complete
    with pytest.raises(TraceError) as refused:
        verify_trace(forged)
    source: Path | worldsim.Trace = held if read else forged
    with pytest.raises(TraceError) as hashed:
        worldsim.canonical_hash(source)
    assert str(hashed.value) == str(refused.value)
    with pytest.raises(TraceError) as replayed:
        worldsim.replay(read_trace(forged) if read else forged)
    assert str(replayed.value) == str(refused.value)


def test_library_readers_give_what_verify_gives_for_a_sound_trace(
    branching_demo_trace: Path,
) -> None:
    found = verify_trace(branching_demo_trace, canonical=True)
    assert worldsim.canonical_hash(branching_demo_trace) == found.canonical
    assert worldsim.canonical_hash(read_trace(branching_demo_trace)) == found.canonical
    replayed = worldsim.replay(branching_demo_trace)
    assert replayed.matches and replayed.recomputed == found.recomputed
    assert replayed.steps and replayed.mass_sum == found.mass_sum
