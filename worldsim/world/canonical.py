"""A memo of the canonical JSON bytes of the immutable parts a world state shares.

Every digest in worldsim is taken over compact, key-sorted JSON
(:func:`~worldsim.domain.jsonbytes.canonical_bytes`). A world state's parts are immutable and
shared between ticks and timelines (an actor map no delta touched is the same object a tick
later), so the bytes of a part are rendered once and reused while the part lives; the digest
then costs in proportion to what changed, plus one pass of SHA-256.
"""

from __future__ import annotations

from collections.abc import Callable

from worldsim.domain.memo import IdentityMemo

__all__ = ["rendered"]

#: Parts remembered; a run keeps a handful alive at a time (one per part and live state).
_RENDERED: IdentityMemo[bytes] = IdentityMemo(256)


def rendered(kind: str, part: object, render: Callable[[], bytes]) -> bytes:
    """``render()``'s bytes for the immutable ``part``, computed once while ``part`` is remembered
    (keyed by identity, see :class:`~worldsim.domain.memo.IdentityMemo`)."""
    return _RENDERED.get(kind, part, render)
