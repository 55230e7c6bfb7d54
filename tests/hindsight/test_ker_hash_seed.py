"""KER does not depend on the process's hash seed: the same traces and graphs give the same
report under every PYTHONHASHSEED (set iteration order must never reach a score)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import anyio
import pytest

from tests.support import ROOT
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card

PROBE = """
import json, sys
from worldsim.scoring.hindsight.forecast import extract_forecast, trace_records
from worldsim.scoring.hindsight.graph import load_hindsight
from worldsim.scoring.hindsight.ker import key_event_recall
out = {}
for trace, graph in json.loads(sys.argv[1]):
    events = extract_forecast(trace_records(trace)).events
    out[trace] = key_event_recall(load_hindsight(graph), events).model_dump(mode="json")
print(json.dumps(out, sort_keys=True))
"""


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    out = tmp_path_factory.mktemp("ker")
    found = []
    for card_path in sorted((ROOT / "scenarios").glob("*.yaml")):
        card = load_card(card_path)
        config = RunConfig(card=card, policy=load_policy("branching"), seed=1)
        trace = anyio.run(functools.partial(run_card, config, out, fsync=False)).trace
        found.append((str(trace), str(ROOT / "scenarios" / "hindsight" / f"{card.id}.json")))
    return found


def test_ker_is_the_same_under_every_hash_seed(pairs: list[tuple[str, str]]) -> None:
    reports = set()
    for seed in range(8):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, json.dumps(pairs)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        reports.add(proc.stdout)
    assert len(reports) == 1
    report = json.loads(reports.pop())
    assert len(report) == 7 and any(r["matches"] for r in report.values())


def test_bm25_does_not_depend_on_set_order() -> None:
    from worldsim.scoring.hindsight.ker import bm25_scores, tokens

    docs = [tokens(t) for t in ("regulator opens review", "company offers remedies", "vote")]
    query = tokens("regulator review company remedies offers opens")
    assert bm25_scores(query, docs) == bm25_scores(frozenset(sorted(query, reverse=True)), docs)
