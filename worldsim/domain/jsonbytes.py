"""JSON bytes exactly as the standard library writes them, made by msgspec where they are equal.

Traces and digests are defined over ``json.dumps`` output: compact separators, non-ASCII as is,
and for digests sorted keys. msgspec writes the same bytes several times faster, except for
floats in exponent form (``1e16`` for ``1e+16``, ``1.5e-7`` for ``1.5e-07``) or below 10⁻⁴
(``0.00001`` for ``1e-05``) and for NaN and infinities (``null``), and it refuses some keys the
standard library takes (sorted, it takes string keys only). msgspec's bytes are used when they
hold none of these; anything else is written by the standard library.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["canonical_bytes", "compact_bytes", "msgspec_bytes"]

_COMPACT = msgspec.json.Encoder()
_SORTED = msgspec.json.Encoder(order="sorted")
# A float msgspec writes in exponent form holds a digit, an ``e`` and a digit or sign: with
# digits and signs mapped to ``0``, a ``0e0``. One elsewhere (an id, a hex digest) only sends
# the value to the standard library, which writes it the same.
_DIGITS = bytes.maketrans(b"123456789-+", b"00000000000")


def _same_as_standard(out: bytes) -> bool:
    return b"null" not in out and b"0.0000" not in out and b"0e0" not in out.translate(_DIGITS)


def msgspec_bytes(value: Any) -> bytes:
    """msgspec's compact bytes for a value known to hold only ints, strings and ``None``
    (where they are the standard library's): a trace envelope's header."""
    return _COMPACT.encode(value)


def compact_bytes(value: Any) -> bytes:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`` in
    UTF-8: NaN and infinities raise ``ValueError``."""
    try:
        out = _COMPACT.encode(value)
    except (TypeError, ValueError):
        out = b"null"
    if _same_as_standard(out):
        return out
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def canonical_bytes(value: Any) -> bytes:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` in
    UTF-8: compact, key-sorted JSON (NaN written as ``NaN``, as the standard library does)."""
    try:
        out = _SORTED.encode(value)
    except (TypeError, ValueError):
        out = b"null"
    if _same_as_standard(out):
        return out
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
