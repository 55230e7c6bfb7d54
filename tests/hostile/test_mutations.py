"""Random mutations of a valid card: a run either completes or is refused before it writes
anything — never a traceback, never a failure halfway with a trace left behind.

Hypothesis replaces one leaf of the demo card (or inserts a key) by an extreme value, a value of
the wrong type or deeply nested data, and runs the card through the command line.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.hostile.corpus import as_yaml, demo, nested
from tests.hostile.harness import assert_refused, in_process, listing


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        return [p for key, child in node.items() for p in _leaves(child, (*path, key))]
    if isinstance(node, list):
        return [p for i, child in enumerate(node) for p in _leaves(child, (*path, i))]
    return [path]


CARD = demo()
LEAVES = _leaves(CARD)

EXTREMES = st.sampled_from(
    [
        10**400,
        -(10**400),
        2**63,
        1e308,
        -1e308,
        float("nan"),
        float("inf"),
        True,
        False,
        None,
        "",
        "x" * 5_000,
        "0001-01-01",
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
        [],
        {},
        json.loads(nested(80)),
    ]
)
VALUES = st.one_of(
    EXTREMES,
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
)


def _mutated(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = demo()
    node: Any = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return data


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(path=st.sampled_from(LEAVES), value=VALUES)
@example(path=("seeds", "variables", "combined_share"), value=10**400)  # beyond a float
def test_a_mutated_card_runs_or_is_refused_before_anything_is_written(
    path: tuple[Any, ...], value: Any
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "card.yaml").write_bytes(as_yaml(_mutated(path, value)))
        before = listing(work)
        args = ("run", "card.yaml", "--out", "out", "--ticks", "2", "--policy", "no_branch")
        outcome = in_process(args, work)
        if outcome.code == 0:
            traces = list((work / "out").glob("*.jsonl"))
            assert len(traces) == 1
            assert b'"type":"run_completed"' in traces[0].read_bytes().splitlines()[-1]
        else:
            assert_refused(outcome, 2, ("card.yaml",))
            assert listing(work) == before


@settings(max_examples=15, deadline=None)
@given(key=st.text(min_size=1, max_size=12), value=VALUES)
def test_an_added_key_is_refused_naming_it(key: str, value: Any) -> None:
    data = demo()
    data["seeds"]["actors"][0][key] = value
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "card.yaml").write_bytes(as_yaml(data))
        before = listing(work)
        outcome = in_process(("run", "card.yaml", "--out", "out"), work)
        if key in CARD["seeds"]["actors"][0] or key in {"role", "favours", "kind"}:
            return  # a known field: its own validation decides
        assert_refused(outcome, 2, ("card.yaml",))
        assert listing(work) == before
