"""``verify``: the hash chain, the seal, and every invariant replay can check."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from worldsim.trace.canonical import canonical_hash
from worldsim.trace.reader import read_trace
from worldsim.trace.replay import ReplayResult, replay

__all__ = ["Verification", "verify_trace"]


@dataclass(frozen=True, slots=True)
class Verification:
    """What ``verify`` found. A trace is *sound* when every complete line checks out."""

    path: Path
    records: int
    torn_line: int | None
    complete: bool
    terminal: str | None
    canonical: str
    replay: ReplayResult

    @property
    def exit_code(self) -> int:
        """0 sound and complete; 3 sound but incomplete (torn tail or no terminal record)."""
        return 0 if self.complete and self.torn_line is None else 3


def verify_trace(path: str | Path) -> Verification:
    """Read, chain-check, validate every record and replay a trace; raises TraceError naming
    the first bad line."""
    trace = read_trace(path)
    trace.validate()
    result = replay(trace)
    terminal = trace.terminal
    return Verification(
        path=trace.path,
        records=len(trace.lines),
        torn_line=trace.torn_line,
        complete=trace.complete,
        terminal=terminal.type if terminal else None,
        canonical=canonical_hash(trace),
        replay=result,
    )
