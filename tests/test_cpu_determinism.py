"""A trace does not depend on the CPU's vector instructions.

numpy dispatches its vector math and reductions to the widest instruction set the CPU has
(AVX2, AVX-512, ...), and their last bits differ between those paths. None of that may reach a
trace: the same card and seed give the same canonical hash on every machine. The probe runs the
pinned demo cards in a fresh interpreter with numpy's dispatched features switched off, which is
what a CPU without them computes, and compares with the pins.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.test_canonical_pins import PINNED

PROBE = r"""
import sys, tempfile
from pathlib import Path
import anyio
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.trace.verify import canonical_hash
from worldsim.trace.reader import read_trace

root = Path(sys.argv[1])
for card_id in sys.argv[2:]:
    card = load_card(root / "scenarios" / f"{card_id}.yaml")
    config = RunConfig(card=card, policy=load_policy("branching"), seed=0)
    with tempfile.TemporaryDirectory() as out:
        result = anyio.run(lambda: run_card(config, Path(out), fsync=False))
        print(card_id, canonical_hash(read_trace(result.trace)))
"""


def _dispatched_features() -> list[str]:
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy < 2
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    return [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)]


def test_demo_cards_hash_the_same_without_vector_instructions() -> None:
    features = _dispatched_features()
    if not features:
        pytest.skip("this CPU has no vector features beyond numpy's baseline to switch off")
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(features)}
    cards = sorted(PINNED)
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), *cards],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    hashes = dict(line.split() for line in probe.stdout.splitlines())
    assert hashes == PINNED
