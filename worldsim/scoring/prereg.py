"""Pre-registration: the analysis fixed before labels are opened, and the lock that proves it.

``worldsim prereg lock`` checks that the prereg names only methods its prediction inputs hold,
then hashes the prereg file and every prediction input (recursively for folders) into a lock
file, and records the head of every trace among them (see
``worldsim.trace.reader.Trace.head``). ``worldsim score --prereg LOCK`` re-hashes them and
refuses to score if anything changed, was removed or was added; a trace whose head differs from
the locked one is named with both heads, so a substituted trace cannot pass as the registered
one. A lock of another schema (``worldsim.prereg-lock/1``, which worldsim 0.2.0 wrote without
heads) is refused with one line naming it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from worldsim.domain.cards import utc_iso
from worldsim.domain.errors import ConfigError, TraceError, TraceIncomplete
from worldsim.domain.files import first_error, load_mapping, load_model, sha256_file
from worldsim.domain.values import FrozenModel
from worldsim.domain.version import __version__
from worldsim.scoring.inputs import rows_from_table
from worldsim.scoring.paired import DEFAULT_RESAMPLES
from worldsim.scoring.recalibrate import SUFFIX as RECALIBRATED
from worldsim.scoring.table import Blend
from worldsim.trace.reader import looks_like_trace, trace_head
from worldsim.trace.verify import Verifying

__all__ = [
    "LOCK_SCHEMA",
    "BootstrapSettings",
    "Lock",
    "LockedFile",
    "Prereg",
    "check_registration",
    "create_lock",
    "load_lock",
    "load_prereg",
    "lock_json",
    "locked_files",
    "verify_lock",
]

LOCK_SCHEMA = "worldsim.prereg-lock/2"
_LAST_READER_OF = {"worldsim.prereg-lock/1": "0.2.0"}
"""For each earlier lock schema, the last worldsim release that reads it."""


class BootstrapSettings(FrozenModel):
    n_resamples: int = Field(DEFAULT_RESAMPLES, ge=100)
    seed: int = Field(0, ge=0, le=2**63 - 1)
    level: float = Field(0.95, gt=0.0, lt=1.0)


class Prereg(FrozenModel):
    """The pre-registered analysis (see ``docs/prereg-template.yaml``)."""

    primary_metric: Literal["brier", "log"] = "brier"
    methods: tuple[str, ...] = Field(min_length=1)
    baseline: str
    comparisons: tuple[str, ...] = Field(min_length=1, description="BASELINE:METHOD pairs")
    tie_eps: tuple[float, ...] = Field((0.0,), min_length=1)
    bootstrap: BootstrapSettings = BootstrapSettings()
    blends: dict[str, dict[str, float]] = Field(default_factory=dict)
    recalibrate: tuple[str, ...] = ()
    """Methods whose cross-validated Platt recalibration (``METHOD+platt``) is registered."""
    extraction_rule: str | None = None

    @field_validator("tie_eps")
    @classmethod
    def _non_negative(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if any(v < 0 for v in values):
            raise ValueError("tie thresholds must be non-negative")
        return values

    @field_validator("comparisons")
    @classmethod
    def _pairs(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for v in values:
            a, sep, b = v.partition(":")
            if not sep or not a or not b or a == b:
                raise ValueError(f"comparison {v!r} is not BASELINE:METHOD")
        return values

    @model_validator(mode="after")
    def _known_names(self) -> Prereg:
        for method in self.recalibrate:
            if method not in self.methods and method != self.baseline:
                raise ValueError(f"recalibrate names '{method}', not a listed method")
        names = {*self.methods, self.baseline, *self.blends, *self.recalibrated()}
        for pair in self.comparisons:
            for name in pair.split(":"):
                if name not in names:
                    raise ValueError(f"comparison names '{name}', not a listed method or blend")
        for blend, weights in self.blends.items():
            for method in weights:
                if method not in self.methods and method != self.baseline:
                    raise ValueError(f"blend '{blend}' uses unlisted method '{method}'")
        return self

    def blend_objects(self) -> list[Blend]:
        return [
            Blend.of(name, list(weights.items()), field=f"blends.{name}")
            for name, weights in self.blends.items()
        ]

    def recalibrated(self) -> list[str]:
        """The registered recalibrations' method names (``METHOD+platt``)."""
        return [f"{method}{RECALIBRATED}" for method in self.recalibrate]

    def pairs(self) -> list[tuple[str, str]]:
        return [(p.split(":")[0], p.split(":")[1]) for p in self.comparisons]


class LockedFile(FrozenModel):
    path: str
    sha256: str
    head: str | None = Field(None, description="a trace's head when it was locked")


class Lock(FrozenModel):
    """What ``prereg lock`` records; paths are relative to the lock file's folder."""

    schema_: str = Field(LOCK_SCHEMA, alias="schema")
    locked_at: str
    prereg: LockedFile
    predictions: tuple[LockedFile, ...]

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def load_prereg(path: str | Path) -> Prereg:
    prereg = load_model(path, Prereg, what="prereg", error=ConfigError)
    try:
        prereg.blend_objects()  # weights are checked when the prereg is read, not when scored
    except ConfigError as exc:
        raise ConfigError(exc.message, file=path, field=exc.field) from None
    return prereg


def locked_files(paths: Sequence[str | Path]) -> list[Path]:
    """Every file a prediction argument names: the file, or every file under a folder.

    The lock covers all files, not only those the scorer reads, so nothing in a locked folder
    can change unnoticed.
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.is_file()))
        elif p.is_file():
            out.append(p)
        else:
            raise ConfigError("prediction input not found", file=p)
    return out


def _relative(path: Path, base: Path) -> str:
    return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()


def _is_trace(path: Path) -> bool:
    return path.suffix.lower() == ".jsonl" and (path.stat().st_size == 0 or looks_like_trace(path))


def _head(path: Path) -> str | None:
    """The head of a prediction file that is a trace, read through the checking reader (the
    chain: a trace that verified when it was locked changes its head with any edit); None for
    a table, or a trace with no complete record."""
    if not _is_trace(path):
        return None
    try:
        return trace_head(path)
    except TraceIncomplete:
        return None
    except TraceError as exc:
        raise ConfigError(exc.message, file=exc.file, line=exc.line, field=exc.field) from None


def _verified_trace(
    path: Path, warn: Callable[[str], None], expect_head: str | None
) -> tuple[str | None, str | None]:
    """The head and method label of a prediction file that is a trace, once it verifies as
    ``verify`` checks it (with ``expect_head``, as ``verify --expect-head`` does; a trace it
    refuses raises its TraceError, exit 1); ``(None, None)`` for a trace that holds no result
    (cut off, or failed), which is locked as a file, not as a trace, and named to ``warn``."""
    reading = Verifying(path, expect_head=expect_head)
    method: str | None = None
    try:
        for line in reading:
            if line.type == "run_started":
                method = str(line.fields.get("method"))
    except TraceIncomplete as exc:
        warn(f"{path}: {exc.message}; locked as a file, not scored")
        return None, None
    result = reading.result
    if not result.complete:
        warn(f"{path}: holds no result ({result.why_incomplete}); locked as a file, not scored")
        return None, None
    return result.head, method


def check_registration(prereg: Prereg, path: str | Path, held: Iterable[str]) -> None:
    """Refuse a registration naming a method that the inputs it locks do not hold: its
    ``methods`` and ``baseline`` (its comparisons, blends and recalibrations name only those,
    as `Prereg` checks), so that a typo or a missing method is caught at lock time rather
    than at ``score`` time, after the labels were opened."""
    have = set(held)
    listed = ", ".join(sorted(have)) or "none"
    for field, names in (("methods", prereg.methods), ("baseline", (prereg.baseline,))):
        missing = [name for name in names if name not in have]
        if missing:
            named = ", ".join(f"'{name}'" for name in missing)
            raise ConfigError(
                f"names {named}, which the prediction inputs do not hold (they hold: {listed})",
                file=path,
                field=field,
            )


def create_lock(
    prereg: str | Path,
    predictions: Sequence[str | Path],
    out: str | Path,
    *,
    heads: Mapping[Path, str] | None = None,
    warn: Callable[[str], None] = lambda _: None,
) -> Lock:
    """Validate the prereg, verify every trace among the prediction files (those ``heads``
    names must have that head: a study's traces, its job log's) and check the registration
    against what they hold (`check_registration`), hash the prereg and every file, record each
    trace's head (a trace that holds no result is named to ``warn`` and locked as a file), and
    build the lock."""
    heads = heads or {}
    registered = load_prereg(prereg)
    base = Path(out).parent
    files = locked_files(predictions)
    if not files:
        raise ConfigError("no prediction files to lock", field="--predictions")
    locked: list[LockedFile] = []
    held: set[str] = set()
    for f in files:
        head: str | None = None
        if _is_trace(f):
            head, method = _verified_trace(f, warn, heads.get(f))
            held.update([method] if method is not None else [])
        elif f.suffix.lower() in (".csv", ".jsonl"):
            held.update(row.method for row in rows_from_table(f))
        locked.append(LockedFile(path=_relative(f, base), sha256=sha256_file(f), head=head))
    check_registration(registered, prereg, held)
    return Lock(
        locked_at=utc_iso(datetime.now(UTC)),
        prereg=LockedFile(path=_relative(Path(prereg), base), sha256=sha256_file(prereg)),
        predictions=tuple(locked),
    )


def lock_json(lock: Lock) -> str:
    payload = lock.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(payload, indent=2) + "\n"


def load_lock(path: str | Path) -> Lock:
    data = load_mapping(path, what="prereg lock", error=ConfigError)
    schema = data.get("schema")
    if schema in _LAST_READER_OF:
        raise ConfigError(
            f"lock schema {schema}: worldsim {__version__} reads {LOCK_SCHEMA} only; "
            f"worldsim {_LAST_READER_OF[schema]} reads {schema}",
            file=path,
            field="schema",
        )
    if schema != LOCK_SCHEMA:
        raise ConfigError(f"not a {LOCK_SCHEMA} file", file=path, field="schema")
    try:
        return Lock.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise ConfigError(message, file=path, field=field) from None


def verify_lock(lock_path: str | Path, predictions: Sequence[str | Path]) -> tuple[Lock, Prereg]:
    """Check the prereg and the prediction inputs against the lock; raise naming what changed."""
    lock = load_lock(lock_path)
    base = Path(lock_path).parent
    prereg_path = base / lock.prereg.path
    if not prereg_path.is_file():
        raise ConfigError("locked prereg is missing", file=prereg_path)
    if sha256_file(prereg_path) != lock.prereg.sha256:
        raise ConfigError(f"prereg changed since it was locked in {lock_path}", file=prereg_path)
    locked = {(base / f.path).resolve(): f for f in lock.predictions}
    current = {f.resolve(): f for f in locked_files(predictions)}
    for path, entry in sorted(locked.items()):
        if path not in current:
            raise ConfigError(
                f"locked prediction input is not among the inputs (or is gone) since {lock_path}",
                file=base / entry.path,
            )
        if entry.head is not None and (head := _head(path)) != entry.head:
            raise ConfigError(
                f"trace changed since it was locked in {lock_path}: its head is "
                f"{head or 'none (not a trace)'}, the locked head {entry.head}",
                file=current[path],
            )
        if sha256_file(path) != entry.sha256:
            raise ConfigError(
                f"prediction input changed since it was locked in {lock_path}", file=current[path]
            )
    for path, given in sorted(current.items()):
        if path not in locked:
            raise ConfigError(
                f"prediction input is not covered by the lock {lock_path}", file=given
            )
    return lock, load_prereg(prereg_path)
