"""What holds a connection or a file until it is closed, used as ``async with``."""

from __future__ import annotations

from typing import Self

__all__ = ["Closing"]


class Closing:
    """A base for what must be closed: ``async with`` gives the object itself and awaits its
    :meth:`aclose` on the way out, however the block ends."""

    __slots__ = ()

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
