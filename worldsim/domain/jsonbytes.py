"""JSON bytes exactly as the standard library writes them, made by msgspec where they are equal.

Traces and digests are defined over ``json.dumps`` output: compact separators, non-ASCII as is,
and for digests sorted keys. msgspec writes the same bytes several times faster, except for
floats in exponent form (``1e16`` for ``1e+16``, ``1.5e-7`` for ``1.5e-07``) or below 10⁻⁴
(``0.00001`` for ``1e-05``) and for NaN and infinities (``null``, or as a key ``"nan"``,
``"inf"``, ``"-inf"``, which the standard library refuses), and it refuses some keys the
standard library takes (sorted, it takes string keys only). msgspec's bytes are used when they
hold none of these (a ``null`` only where the value holds no NaN or infinity, which msgspec
writes as ``null`` too); anything else is written by the standard library. Callers pass JSON
data (dicts, lists, tuples, strings, numbers, booleans, ``None``): msgspec would also write
sets, bytes or dates, which the standard library refuses
(``tests/test_hash_seed_determinism.py`` would see a set's order).

A caller that built a value from typed parts may know every float it holds (a tick's
proposals: two each, and those of the few that carry deltas; a tick's gateway accesses: none).
Given them as ``floats`` (each as often as it occurs), msgspec's bytes are taken without being
looked at (the look costs twice the encoding of a record of a few megabytes): as they are when
each is zero or finite with a magnitude from 10⁻⁴ up to 10¹⁶ (which msgspec writes as the
standard library does), else with the few others respelled where that is certain
(:func:`_respelled`). :func:`floats_in` finds them in a small part of such
a value.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

__all__ = [
    "canonical_ascii_bytes",
    "canonical_bytes",
    "compact_bytes",
    "compact_into",
    "floats_in",
    "json_row",
    "msgspec_bytes",
    "odd_positions",
    "raw_json",
    "raw_rows",
]

_COMPACT = msgspec.json.Encoder()
_PACKED = msgspec.msgpack.Encoder()
_NON_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")
_SORTED = msgspec.json.Encoder(order="sorted")
# A float msgspec writes in exponent form holds a digit, an ``e`` and a digit or sign: with
# digits, signs and points mapped to ``0``, a ``0e0``, whose run of ``0`` starts a number
# token (after ``:``, ``,``, ``[`` or at the start) or makes up a whole key (``"1e16":``: a
# float key is written as a string). One inside a string value (a run id, a hex digest) does
# neither.
_DIGITS = bytes.maketrans(b"123456789-+.", b"000000000000")
_NUMBER_STARTS = frozenset(b':,["')
_NUMBER_CHARS = frozenset(b"0e")
_ZERO, _QUOTE = ord("0"), ord('"')
_LOOKALIKES = 64  # "0e0"s inside strings looked at before the standard library decides


_STANDARD_COMPACT: dict[str, Any] = {
    "separators": (",", ":"),
    "ensure_ascii": False,
    "allow_nan": False,
}
_STANDARD_SORTED: dict[str, Any] = {
    "sort_keys": True,
    "separators": (",", ":"),
    "ensure_ascii": False,
}


def _bytes(
    fast: msgspec.json.Encoder,
    value: Any,
    standard: dict[str, Any],
    floats: Iterable[float] | None = None,
) -> bytes:
    """``json.dumps(value, **standard)`` in UTF-8, from ``fast`` when its bytes are the same.

    With ``floats`` (every float ``value`` holds, keys included, each as often as it occurs),
    msgspec's bytes are taken, respelled where needed (:func:`_respelled`); where that cannot
    be done for certain, or without ``floats``, the bytes are looked at (:func:`_same`), and a
    value whose bytes may differ is written by the standard library.
    """
    out = _encoded(fast, value)
    if out is None:
        return json.dumps(value, default=_plain, **standard).encode()
    if floats is not None:
        respelled = _respelled(out, floats)
        if respelled is not None:
            return respelled
    if _same(out, value):
        return out
    return json.dumps(value, default=_plain, **standard).encode()


def _plain(value: Any) -> Any:
    """A row (`json_row`) or JSON made already (`raw_json`) as the plain value it writes, for
    the standard library to write: msgspec's bytes read back, every float as it was."""
    if isinstance(value, msgspec.Struct | msgspec.Raw):
        return msgspec.json.decode(_COMPACT.encode(value))
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _respelled(out: bytes, floats: Iterable[float]) -> bytes | None:
    """msgspec's bytes ``out`` of a value holding ``floats`` (each as often as it occurs), with
    the few floats msgspec spells otherwise (not zero, and a magnitude below 10⁻⁴ or from
    10¹⁶: the standard library's exponent form) respelled as the standard library does, or
    ``None`` where that cannot be done for certain.

    A float's token is respelled only where its msgspec spelling occurs in ``out`` exactly as
    often as the float does (then every occurrence is that float's token, or a float key's,
    which both write with ``float.__repr__``: each occurrence of the float writes one, and there
    are no others), and no new spelling holds an old one. NaN, the infinities, a string or a
    longer number holding the spelling: ``None``, and the bytes are looked at as for any
    value."""
    odd = _odd(floats)
    if not odd:
        return out
    swaps: list[tuple[bytes, bytes]] = []
    for x, times in odd.items():
        if not math.isfinite(x):
            return None
        spelled = _COMPACT.encode(x)
        if out.count(spelled) != times:
            return None
        swaps.append((spelled, repr(x).encode()))  # the standard library writes float.__repr__
    if any(old in new for old, _ in swaps for _, new in swaps):
        return None
    for old, new in swaps:
        out = out.replace(old, new)
    return out


def _odd(floats: Iterable[float]) -> Counter[float]:
    """The floats msgspec may spell otherwise than the standard library (not zero, and a
    magnitude outside [10⁻⁴, 10¹⁶), or not finite), each with how often it occurs."""
    return Counter(x for x in floats if not (x == 0.0 or 1e-4 <= abs(x) < 1e16))


def odd_positions(values: Any) -> list[int]:
    """Where an array of floats holds one msgspec may spell otherwise than the standard library
    (not zero, and a magnitude outside [10⁻⁴, 10¹⁶), or not finite)."""
    import numpy as np

    array = np.asarray(values, dtype=np.float64)
    size = np.abs(array)
    alike = (array == 0.0) | ((size >= 1e-4) & (size < 1e16))
    odd: list[int] = np.flatnonzero(~alike).tolist()
    return odd


def json_row(
    name: str, fields: Sequence[str], *, optional: Mapping[str, Any] | None = None
) -> Callable[..., Any]:
    """A row type, made with its values in ``fields``' order, that msgspec writes where it
    stands in a value as the JSON object of those fields in that order (a field of
    ``optional`` left out where it holds the default given there), each value written as
    this module writes it; untracked by the collector (a row's values must hold no cycle).
    Many rows made by ``map`` over columns cost no line of Python each."""
    optional = optional or {}
    spec = [(f, Any, optional[f]) if f in optional else (f, Any) for f in fields]
    return msgspec.defstruct(name, spec, gc=False, omit_defaults=bool(optional))


def raw_json(encoded: bytes) -> msgspec.Raw:
    """JSON bytes made already (the standard library's), to be written as they are where they
    stand in a value."""
    return msgspec.Raw(encoded)


def raw_rows(rows: Iterable[bytes]) -> list[msgspec.Raw]:
    """JSON made already (each row one or more values, comma-separated), as the items of a
    list that stands in a value: written as they are, with no join of them all before the
    record's own encoding."""
    return list(map(msgspec.Raw, rows))


def floats_in(value: Any) -> Iterator[float]:
    """Every float a JSON value holds, dict keys included (meant for a small part of a record:
    it walks the value in Python)."""
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, float):
                yield key
            yield from floats_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from floats_in(item)


def _encoded(fast: msgspec.json.Encoder, value: Any) -> bytes | None:
    """msgspec's bytes for ``value``, or ``None`` where it refuses it (a key it does not
    take: the standard library decides)."""
    try:
        return fast.encode(value)
    except (TypeError, ValueError):
        return None


def _same(out: bytes, value: Any) -> bool:
    """Whether msgspec's bytes ``out`` for ``value`` are certainly the standard library's."""
    return not (
        (b"null" in out and _non_finite(value))
        or b"0.0000" in out
        or _exponent(out)
        or b'inf":' in out  # a float key msgspec writes as a string: "inf", "-inf"
        or b'nan":' in out
    )


def _non_finite(value: Any) -> bool:
    """Whether ``value`` may hold a NaN or an infinity (which msgspec writes as ``null``, as it
    writes ``None``): msgpack writes every float as ``0xcb`` and its eight bytes, and those of
    a NaN or an infinity begin with an exponent of all ones (``7ff``/``fff``). A string's UTF-8
    never holds ``0xcb`` before ``0x7f`` or ``0xff``; a match elsewhere (inside an int) only
    sends the value to the standard library."""
    try:
        packed = _PACKED.encode(value)
    except (TypeError, ValueError, OverflowError):
        return True
    return _NON_FINITE.search(packed) is not None


def _exponent(out: bytes) -> bool:
    """Whether ``out`` may hold a float in exponent form (see :data:`_DIGITS`)."""
    mapped = out.translate(_DIGITS)
    at = mapped.find(b"0e0")
    for _ in range(_LOOKALIKES):
        if at < 0:
            return False
        start = at
        while start and mapped[start - 1] == _ZERO:  # back over the digits before the e
            start -= 1
        if start == 0 or out[start - 1] in _NUMBER_STARTS:
            if start == 0 or out[start - 1] != _QUOTE:
                return True  # a number token
            end = at + 1
            while end < len(mapped) and mapped[end] in _NUMBER_CHARS:
                end += 1
            if out[end : end + 2] == b'":':
                return True  # a key that may be a float's
        at = mapped.find(b"0e0", at + 1)
    return at >= 0


msgspec_bytes: Callable[[Any], bytes] = _COMPACT.encode
"""msgspec's compact bytes for a value known to hold only ints, strings and ``None`` (where
they are the standard library's): a trace envelope's header, a string (the encoder's own
method: a forecast graph of 10⁵ actors encodes millions of ids)."""


def compact_bytes(value: Any, floats: Iterable[float] | None = None) -> bytes:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`` in
    UTF-8: NaN and infinities raise ``ValueError``. ``floats``: every float ``value`` holds,
    where the caller knows them (see the module's docstring)."""
    return _bytes(_COMPACT, value, _STANDARD_COMPACT, floats)


def compact_into(buffer: bytearray, value: Any, floats: Iterable[float] | None = None) -> None:
    """:func:`compact_bytes` of ``value`` appended to ``buffer``: written there by msgspec
    where ``floats`` (every float ``value`` holds) are all ones it spells as the standard
    library does, so a record of tens of megabytes is not copied again."""
    if floats is not None:
        floats = list(floats)
        if not _odd(floats):
            start = len(buffer)
            try:
                _COMPACT.encode_into(value, buffer, -1)
                return
            except (TypeError, ValueError):  # a key msgspec does not take: as compact_bytes
                del buffer[start:]
    buffer += compact_bytes(value, floats)


def canonical_bytes(value: Any, floats: Iterable[float] | None = None) -> bytes:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` in
    UTF-8: compact, key-sorted JSON (NaN written as ``NaN``, as the standard library does).
    ``floats``: as for :func:`compact_bytes`."""
    return _bytes(_SORTED, value, _STANDARD_SORTED, floats)


def canonical_ascii_bytes(value: Any) -> bytes:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))`` in UTF-8:
    :func:`canonical_bytes` with non-ASCII escaped, the spelling a card's hash is taken over
    (msgspec's bytes where they are all ASCII, as a card's text almost always is)."""
    out = canonical_bytes(value)
    if out.isascii():
        return out
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
