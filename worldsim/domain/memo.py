"""Values computed once per live object: a memo keyed by identity, for immutable parts.

A world state's parts, a document's view, a search hit's view: immutable objects handed out again
and again, whose renderings (canonical JSON, an agent's view, a JSON form) are worth computing
once. Keying by ``id`` is cheaper than hashing the object; each entry holds its object, so the id
cannot be reused by another object while the entry exists.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["IdentityMemo"]

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """``make()``'s value for ``(kind, obj)``, computed once while the entry is remembered; the
    least recently used entry is forgotten first once ``capacity`` entries are held."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, int], tuple[object, T]] = OrderedDict()

    def get(self, kind: str, obj: object, make: Callable[[], T]) -> T:
        key = (kind, id(obj))
        hit = self._entries.get(key)
        if hit is not None and hit[0] is obj:
            self._entries.move_to_end(key)
            return hit[1]
        value = make()
        self._entries[key] = (obj, value)
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return value
