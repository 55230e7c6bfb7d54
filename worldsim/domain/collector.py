"""The garbage collector's pace for a program that runs worldsim: a process-wide setting.

Runs and trace reads allocate many short-lived objects (requests, tool results, records, parsed
lines) beside long-lived ones (a world's actors, ledger and indexes; a reader's open ticks,
replayed state and forecast graph). At the interpreter's default pace (a young collection every
700 net allocations) the older generations come due so often that walking the long-lived
objects again took about a fifth of an offline run of 10³ actors, and about a third of
``verify`` on a 57 MB trace, and found nothing to free: neither makes reference cycles as it
goes. Inside :func:`collector_paced` the youngest generation is collected every
:data:`PACED_THRESHOLD` net allocations instead; the thresholds set before come back when the
last use ends. Reference counting still frees almost every object at once; only reference
cycles wait longer.

The thresholds belong to the whole interpreter, so the program decides, never a library call:
the ``worldsim`` command (`worldsim.cli.main`), a study's Ray workers and the benchmarks opt in
around everything they do. A program that calls worldsim as a library opts in the same way::

    with worldsim.collector_paced():
        anyio.run(worldsim.run_card, config)

At 100,000 the collector still took about a twelfth of an offline run of 10⁴ actors (27 young
and 2 middle collections walking the tick's records and accesses, then the forecast graph's,
for 0.6–0.8 s); at 1,000,000 such a run makes none, at the same peak RSS.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["PACED_THRESHOLD", "collector_paced"]

#: Net allocations between two collections of the youngest generation during a paced pass.
PACED_THRESHOLD = 1_000_000


class _Pace:
    """How many passes are in progress (in any thread), and the thresholds from before the
    first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.passes = 0
        self.before: tuple[int, int, int] | None = None


_pace = _Pace()


@contextlib.contextmanager
def collector_paced() -> Iterator[None]:
    """Collect the youngest generation every :data:`PACED_THRESHOLD` allocations inside.

    Nested and concurrent uses count (a run that reads its own trace back, two runs in two
    threads): the first in raises the threshold, the last out restores what it found. A
    threshold already higher, or 0 (automatic collection off), is left alone.
    """
    with _pace.lock:
        if _pace.passes == 0:
            _pace.before = gc.get_threshold()
            young, *older = _pace.before
            if 0 < young < PACED_THRESHOLD:
                gc.set_threshold(PACED_THRESHOLD, *older)
        _pace.passes += 1
    try:
        yield
    finally:
        with _pace.lock:
            _pace.passes -= 1
            if _pace.passes == 0 and _pace.before is not None:
                gc.set_threshold(*_pace.before)
                _pace.before = None
