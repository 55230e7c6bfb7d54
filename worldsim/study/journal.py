"""A study's job log, ``jobs.jsonl``: one line appended as each job ends, saying which trace it
left and that trace's head (its anchor), whether it completed or failed, and its wall time.

The log is what a study records of its results: every number ``score``, ``view`` and
``export`` show for a study is read from the trace a log line names, verified, with the head
the line recorded. Appending costs the same whatever the study's size, and a line is whole once
its newline is written: a study killed mid-write leaves a torn last line, which is ignored (the
job runs again). A job that runs again (resumed, retried) appends another line; the last line
of a trace is the one that counts.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from worldsim.domain.errors import ConfigError

__all__ = ["JOURNAL", "Finished", "Journal", "read_journal"]

JOURNAL = "jobs.jsonl"

Outcome = Literal["complete", "failed"]


@dataclass(frozen=True, slots=True)
class Finished:
    """How one job ended: its trace (relative to the study folder), the trace's head (``None``
    when the job left no sound record), ``complete`` or ``failed`` and why, and the wall time
    of its runs so far."""

    trace: str
    head: str | None
    status: Outcome
    error: str | None
    wall_s: float

    def line(self) -> bytes:
        return (json.dumps(asdict(self), separators=(",", ":"), sort_keys=True) + "\n").encode()


class Journal:
    """The job log of a study folder, open for appending."""

    def __init__(self, folder: Path, *, fsync: bool = True) -> None:
        self.path = folder / JOURNAL
        self._fsync = fsync
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size and not _ends_with_newline(self.path):
            # a torn line from a killed study: its job never ended as far as the log knows,
            # so it runs again; cutting the fragment keeps every line the log holds whole
            os.ftruncate(self._fd, self.path.read_bytes().rfind(b"\n") + 1)

    def record(self, finished: Finished) -> None:
        """Append one whole line (and with ``fsync``, make it durable)."""
        line = finished.line()
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view) :]
        if self._fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def read_journal(folder: Path) -> dict[str, Finished]:
    """Each trace's last line in the folder's job log ({} when there is none). A torn line (a
    study killed mid-write) is skipped; any other bad line is a ConfigError naming it."""
    path = folder / JOURNAL
    if not path.is_file():
        return {}
    found: dict[str, Finished] = {}
    for number, raw in _lines(path):
        try:
            record = json.loads(raw)
            finished = Finished(
                trace=_text(record["trace"]),
                head=None if record["head"] is None else _text(record["head"]),
                status=_status(record["status"]),
                error=None if record["error"] is None else _text(record["error"]),
                wall_s=_seconds(record["wall_s"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"not a job log line ({type(exc).__name__}: {exc})", file=path, line=number
            ) from None
        found[finished.trace] = finished
    return found


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The whole lines of the log (a last line without its newline is torn: left out)."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    whole = lines[:-1]  # what follows the last newline is empty or torn
    for number, raw in enumerate(whole, start=1):
        if raw.strip():
            yield number, raw


def _text(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected text, got {value!r}")
    return value


def _status(value: object) -> Outcome:
    if value == "complete":
        return "complete"
    if value == "failed":
        return "failed"
    raise ValueError(f"status {value!r} is neither complete nor failed")


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"wall_s {value!r} is not a number of seconds")
    return float(value)
