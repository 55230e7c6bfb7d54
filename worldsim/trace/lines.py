"""A trace line: parsing its bytes, its envelope and record, and the checks one line can
prove alone — its seal, its place in the chain, the writer's form (DESIGN §4.8).

:mod:`worldsim.trace.reader` reads files of these lines (and re-exports the public names).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any

import msgspec
from pydantic import ValidationError

from worldsim.domain.errors import TraceError
from worldsim.domain.files import first_error
from worldsim.domain.jsonbytes import compact_bytes
from worldsim.trace.records import (
    TRACE_ADAPTER,
)
from worldsim.trace.writer import SEALED_TYPES, genesis_hash

__all__ = [
    "TraceLine",
    "check_line",
    "decode_line",
    "in_writers_form",
    "parse_line",
    "seal_holds",
    "whole_record",
]


_SEAL = re.compile(rb'"seal":"([0-9a-f]{64})"')
_SIGNATURE = re.compile(rb'"signature":"[0-9a-f]*"')
_DECODER = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()
_forms = threading.local()


def _float_literal(text: str) -> float:
    """msgspec's float hook for the form check: notes a literal msgspec would write otherwise
    than the writer (in exponent form, or below 10⁻⁴ in fixed form), then reads it as msgspec
    does (correctly rounded)."""
    if "e" in text or "E" in text or text.lstrip("-").startswith("0.0000"):
        _forms.exponent = True
    return float(text)


_FORM_DECODER = msgspec.json.Decoder(float_hook=_float_literal)


def decode_line(raw: bytes) -> tuple[Any, bool]:
    """``(obj, plain)``: the line as :func:`parse_line` reads it, and whether msgspec read it
    with every float literal in the form msgspec itself writes (so that its encoding of ``obj``
    can stand in for the writer's, see :func:`in_writers_form`). Raises what ``json.loads``
    raises."""
    _forms.exponent = False
    try:
        obj = _FORM_DECODER.decode(raw)
    except ValueError:  # msgspec.DecodeError, UnicodeDecodeError
        return json.loads(raw), False
    return obj, not _forms.exponent


def parse_line(raw: bytes) -> Any:
    """One trace line as JSON, with exactly the values and errors of :func:`json.loads`.

    msgspec's decoder reads the line (about twice as fast); what it refuses — ``NaN``, numbers
    out of a float's range, lone surrogates — goes to the standard library, which decides.
    """
    try:
        return _DECODER.decode(raw)
    except ValueError:  # msgspec.DecodeError, UnicodeDecodeError
        return json.loads(raw)


class TraceLine:
    """One sound line of a trace: its bytes, its envelope, and the record, parsed on use.

    The envelope (``type``, ``tl``, ``tick``, ``run``) is read when the trace is read; the line
    keeps its bytes and is parsed again the first time ``obj`` or ``fields`` is read (keeping
    only the bytes keeps a long trace cheap to hold), unless the reader was asked to hand over
    its parse (:func:`iter_trace` with ``parsed``). The typed record is validated against the
    trace schema the first time ``record`` or ``data`` is read (an invalid record is then a
    :class:`TraceError` naming the file, line and field).
    """

    __slots__ = (
        "_obj",
        "_plain",
        "_record",
        "number",
        "path",
        "raw",
        "run",
        "tick",
        "tl",
        "type",
    )

    def __init__(
        self,
        number: int,
        raw: bytes,
        path: Path,
        *,
        type: str,
        tl: str | None,
        tick: int | None,
        run: str,
        parsed: tuple[dict[str, Any], bool] | None = None,
    ) -> None:
        self.number = number
        self.raw = raw
        self.path = path
        self.type = type
        self.tl = tl
        self.tick = tick
        self.run = run
        self._obj: dict[str, Any] | None = None
        self._plain = False
        if parsed is not None:
            self._obj, self._plain = parsed
        self._record: Any = None

    def error(self, message: str) -> TraceError:
        """A TraceError about this line: its file, number, timeline and tick."""
        record = self.record
        return TraceError(
            message, file=self.path, line=self.number, timeline=record.tl, tick=record.tick
        )

    def release(self, *, record: bool = False) -> TraceLine:
        """Let the parsed JSON go (and with ``record``, the validated record): what a held line
        keeps is its bytes, and what is let go is made again on use."""
        self._obj = None
        if record:
            self._record = None
        return self

    @property
    def in_writers_form(self) -> bool:
        """Whether the line is exactly the writer's bytes for its content (see
        :func:`in_writers_form`), from the parse the reader made when it has it."""
        if self._obj is None:
            return in_writers_form(self.raw)
        return _same_as_writers(self.raw, self._obj, plain=self._plain)

    def __repr__(self) -> str:
        return f"TraceLine({self.number}, {self.type!r}, tl={self.tl!r}, tick={self.tick!r})"

    @property
    def obj(self) -> dict[str, Any]:
        """The whole line as parsed JSON (the envelope and its ``data``), without validation."""
        if self._obj is None:
            self._obj = parse_line(self.raw)
        return self._obj

    @property
    def fields(self) -> dict[str, Any]:
        """The record's ``data`` as parsed JSON, without schema validation."""
        data = self.obj.get("data")
        return data if isinstance(data, dict) else {}

    @property
    def record(self) -> Any:
        """The envelope model of :mod:`worldsim.trace.records`, validated on first use."""
        if self._record is None:
            # strictly, from the line's bytes: a value of another JSON type than the schema's
            # (a whole number written as 2.0, a boolean for a number) is not the writer's
            try:
                self._record = TRACE_ADAPTER.validate_json(self.raw, strict=True)
            except ValidationError as exc:
                field, message = first_error(exc)
                raise TraceError(message, file=self.path, line=self.number, field=field) from None
        return self._record

    @property
    def data(self) -> Any:
        return self.record.data


def seal_holds(raw: bytes) -> bool:
    """The seal rule: ``data.seal`` is the SHA-256 of the line with ``"seal":""`` and (when the
    field is there) ``"signature":""``; the signature is added after sealing."""
    found = _SEAL.findall(raw)
    if len(found) != 1 or len(_SIGNATURE.findall(raw)) > 1:
        return False
    unsealed = _SIGNATURE.sub(b'"signature":""', _SEAL.sub(b'"seal":""', raw))
    return bool(hashlib.sha256(unsealed).hexdigest() == found[0].decode())


def whole_record(raw: bytes, seq: int, prev: str | None) -> bool:
    """Whether ``raw`` is the whole record that would come next: a closed JSON object (nothing
    after its brace) with the expected ``seq`` and ``prev`` (``None``: the first line, chained
    to its own run id), sealed if it is a terminal record. A line cut off mid-write never is."""
    if not raw.endswith(b"}"):
        return False
    try:
        obj = parse_line(raw)
    except (ValueError, RecursionError):
        return False
    if not isinstance(obj, dict) or obj.get("seq") != seq:
        return False
    if prev is None:
        run = obj.get("run")
        prev = genesis_hash(run) if isinstance(run, str) else None
    if prev is None or obj.get("prev") != prev:
        return False
    return obj.get("type") not in SEALED_TYPES or seal_holds(raw)


def in_writers_form(raw: bytes) -> bool:
    """Whether ``raw`` is exactly the writer's bytes for its content
    (:func:`~worldsim.domain.jsonbytes.compact_bytes`).

    msgspec encodes a parsed line about ten times faster than :func:`json.dumps` and writes
    every value as it does, except floats that Python writes in exponent form (``1e-05``,
    ``1e+16``), which msgspec writes otherwise (``0.00001``, ``1e16``). So a line whose floats
    are all in plain form is checked with msgspec; one holding any other float literal (or
    anything msgspec cannot read) is checked with the writer's own encoder.
    """
    try:
        obj, plain = decode_line(raw)
    except ValueError:
        return False
    return _same_as_writers(raw, obj, plain=plain)


def _same_as_writers(raw: bytes, obj: Any, *, plain: bool) -> bool:
    """``raw`` is the writer's bytes for ``obj``; ``plain`` as :func:`_decode` says."""
    if plain and _ENCODER.encode(obj) == raw:
        return True
    try:
        return compact_bytes(obj) == raw
    except ValueError:  # NaN or an infinity: the writer refuses them
        return False


def check_line(line: TraceLine) -> None:
    """Validate a line's record against the schema and check that it is in the writer's
    canonical form; raises :class:`TraceError` naming the line (and field).

    A line held as bytes alone (a trace read whole) is parsed once for both checks, as a
    streamed one is when it is read, and let go again after them."""
    parsed_here = line._obj is None
    if parsed_here:
        try:
            line._obj, line._plain = decode_line(line.raw)
        except ValueError:  # not JSON: the record's own parse names the error
            parsed_here = False
    try:
        line.record  # noqa: B018  (validates)
        sound = line.in_writers_form
    finally:
        if parsed_here:
            line._obj, line._plain = None, False
    if not sound:
        raise TraceError(
            "record is not in the writer's canonical form", file=line.path, line=line.number
        )
