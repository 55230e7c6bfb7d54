"""Fork cost against state size, beside ``copy.deepcopy`` of the same state (DESIGN §4.4).

A fork, as the engine makes one, is a child :class:`Timeline` sharing the parent's state plus the
fork's deltas applied to the child. Here that is one ``SetVariable`` on a state whose
``variables`` map holds 10³ … 10⁶ entries. The baseline is ``copy.deepcopy`` of the same state as
plain data (``WorldState.to_json()``), which is what a fork would cost without structural sharing.
``state_digest`` is timed too: the engine digests a timeline's whole state when it starts and at
every committed tick, so it is the part of forking that still grows with the state.
"""

from __future__ import annotations

import copy
import gc
import time
from dataclasses import replace
from typing import Any

from immutables import Map

from benchmarks._common import demo_card, gc_paused, median_ns, ratio, traced_bytes
from worldsim.world.build import build_world
from worldsim.world.state import SetVariable, WorldState, apply_deltas, state_digest
from worldsim.world.timeline import Timeline, child_id

__all__ = ["rows", "run"]

SIZES = (1_000, 10_000, 100_000, 1_000_000)
#: Forks kept alive at once when measuring a fork's added memory.
MEMORY_FORKS = 100


def _key(i: int) -> str:
    return f"var_{i:07d}"


def state_with_variables(n: int) -> WorldState:
    """The demo card's initial state with ``variables`` replaced by ``n`` float entries."""
    state, _ = build_world(demo_card(), 8)
    # Building a large Map with the collector running is several times slower (its nodes are
    # tracked); the state is setup here, not what is measured.
    with gc_paused():
        variables: Map[str, float] = Map({_key(i): i * 0.5 for i in range(n)})
    return replace(state, variables=variables)


def fork(parent: Timeline, delta: SetVariable) -> Timeline:
    """A fork as the engine makes one: a child sharing the state, then the fork's deltas."""
    child = Timeline(
        child_id(parent.id, parent.children + 1),
        parent.id,
        0,
        parent.depth + 1,
        parent.mass * 0.5,
        max(1, parent.slots // 2),
        parent.state,
    )
    child.state = apply_deltas(child.state, (delta,))
    return child


def _time_once_ns(fn: Any, repeats: int) -> list[float]:
    samples: list[float] = []
    for _ in range(repeats):
        with gc_paused():
            start = time.perf_counter_ns()
            fn()
            samples.append(float(time.perf_counter_ns() - start))
    return samples


def measure(n: int, *, quick: bool) -> dict[str, Any]:
    state = state_with_variables(n)
    parent = Timeline("t0", None, None, 0, 1.0, 4, state)
    delta = SetVariable(name=_key(n // 2), value=-1.0)

    loops, repeats = (300, 5) if quick else (2_000, 9)
    fork_ns = median_ns(lambda: fork(parent, delta), loops=loops, repeats=repeats)
    forks, fork_bytes_total, _ = traced_bytes(
        lambda: [fork(parent, delta) for _ in range(MEMORY_FORKS)]
    )
    if forks[0].state.variables[_key(n // 2)] != -1.0 or parent.state is not state:
        raise RuntimeError("the measured fork did not change the child alone")
    del forks

    plain = state.to_json()
    big = n >= 1_000_000
    deep_repeats = (1 if big else 3) if quick else (2 if big else 5)
    deep_samples = _time_once_ns(lambda: copy.deepcopy(plain), deep_repeats)
    clone, deep_bytes, deep_peak = traced_bytes(lambda: copy.deepcopy(plain))
    del clone

    digest_repeats = 1 if big else (2 if quick else 3)
    digest_samples = _time_once_ns(lambda: state_digest(state), digest_repeats)

    fork_bytes = fork_bytes_total / MEMORY_FORKS
    deepcopy_ns = sorted(deep_samples)[len(deep_samples) // 2]
    digest_ns = sorted(digest_samples)[len(digest_samples) // 2]
    return {
        "n": n,
        "fork_ns": fork_ns,
        "fork_loops": loops,
        "fork_repeats": repeats,
        "fork_bytes": fork_bytes,
        "deepcopy_ns": deepcopy_ns,
        "deepcopy_samples_ns": deep_samples,
        "deepcopy_bytes": deep_bytes,
        "deepcopy_peak_bytes": deep_peak,
        "digest_ns": digest_ns,
        "digest_samples_ns": digest_samples,
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Measure every size; ratios are taken against the smallest state and against the fork."""
    points: list[dict[str, Any]] = []
    for n in SIZES:
        points.append(measure(n, quick=quick))
        gc.collect()  # the previous size's state is garbage now; keep it out of the next one
    base = points[0]
    for p in points:
        p["fork_vs_smallest"] = ratio(p["fork_ns"], base["fork_ns"])
        p["fork_bytes_vs_smallest"] = ratio(p["fork_bytes"], base["fork_bytes"])
        p["deepcopy_over_fork"] = ratio(p["deepcopy_ns"], p["fork_ns"])
        p["deepcopy_bytes_over_fork"] = ratio(p["deepcopy_bytes"], p["fork_bytes"])
        p["digest_over_fork"] = ratio(p["digest_ns"], p["fork_ns"])
    return {
        "what": "fork (child Timeline + one SetVariable) vs copy.deepcopy of the state's JSON",
        "sizes": list(SIZES),
        "memory_forks": MEMORY_FORKS,
        "points": points,
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "state entries": p["n"],
            "fork time ÷ fork@10³": p["fork_vs_smallest"],
            "deepcopy ÷ fork (time)": p["deepcopy_over_fork"],
            "fork added bytes": round(p["fork_bytes"]),
            "deepcopy added bytes": p["deepcopy_bytes"],
            "deepcopy ÷ fork (memory)": p["deepcopy_bytes_over_fork"],
            "state_digest ÷ fork (time)": p["digest_over_fork"],
        }
        for p in result["points"]
    ]
