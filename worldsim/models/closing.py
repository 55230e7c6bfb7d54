"""What holds a connection or a file until it is closed, used as ``async with``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self

__all__ = ["Closing"]


class Closing(ABC):
    """A base for what must be closed: ``async with`` gives the object itself and awaits its
    :meth:`aclose` on the way out, however the block ends."""

    __slots__ = ()

    @abstractmethod
    async def aclose(self) -> None:
        """Close what the object holds."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
