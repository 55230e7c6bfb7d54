"""The garbage collector's pace while runs are in progress.

A run allocates many short-lived objects (requests, tool results, records, proposals) beside a
world of long-lived ones (actors, ledger, indexes). At the interpreter's default pace (a young
collection every 700 net allocations) the older generations come due so often that walking the
long-lived objects again took about a fifth of an offline run of 10³ actors, and found almost
nothing to free (a run makes next to no reference cycles). While at least one run is in
progress the youngest generation is collected every :data:`RUN_THRESHOLD` net allocations
instead (a pause of a few tens of milliseconds each); the thresholds set before come back when
the last run ends. Reference counting still frees almost every object at once; only reference
cycles wait longer.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["RUN_THRESHOLD", "collector_paced"]

#: Net allocations between two collections of the youngest generation during a run.
RUN_THRESHOLD = 100_000


class _Pace:
    """How many runs are in progress (in any thread), and the thresholds from before the first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs = 0
        self.before: tuple[int, int, int] | None = None


_pace = _Pace()


@contextlib.contextmanager
def collector_paced() -> Iterator[None]:
    """Collect the youngest generation every :data:`RUN_THRESHOLD` allocations inside.

    Nested and concurrent uses count: the first in raises the threshold, the last out restores
    what it found. A threshold already higher, or 0 (automatic collection off), is left alone.
    """
    with _pace.lock:
        if _pace.runs == 0:
            _pace.before = gc.get_threshold()
            young, *older = _pace.before
            if 0 < young < RUN_THRESHOLD:
                gc.set_threshold(RUN_THRESHOLD, *older)
        _pace.runs += 1
    try:
        yield
    finally:
        with _pace.lock:
            _pace.runs -= 1
            if _pace.runs == 0 and _pace.before is not None:
                gc.set_threshold(*_pace.before)
                _pace.before = None
