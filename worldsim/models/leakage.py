"""The leakage guard: forbidden strings must not appear in any prompt or reply.

Forbidden strings (masked entities, the resolution, ...) come from a file, one per line. The
guard matches them case-insensitively and records each hit as a count and the SHA-256 of the
case-folded string, so its findings can be published in the audit without repeating the
strings. In ``fail`` mode a hit raises `LeakageError` (before a prompt is sent).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from worldsim.domain.contracts import CallSite, ModelRequest, ModelResponse, ModelWrapper
from worldsim.domain.errors import ConfigError, LeakageError, ModelError
from worldsim.domain.values import FrozenModel

__all__ = ["LeakageFinding", "LeakageGuard", "LeakageGuardModel", "LeakageMode", "fingerprint"]

LeakageMode = Literal["record", "fail"]


def fingerprint(text: str) -> str:
    """SHA-256 hex of the case-folded string: how findings name a forbidden string."""
    return hashlib.sha256(text.casefold().encode("utf-8")).hexdigest()


class LeakageFinding(FrozenModel):
    """One forbidden string found in one prompt or reply."""

    where: Literal["prompt", "reply"]
    sha256: str
    count: int
    route: str
    role: str
    agent: str
    timeline: str | None = None
    tick: int | None = None
    index: int = 0


@dataclass
class LeakageGuard:
    """Scans text for forbidden strings and keeps the findings of the run."""

    forbidden: tuple[str, ...]
    mode: LeakageMode = "record"
    findings: list[LeakageFinding] = field(default_factory=list)
    _needles: tuple[str, ...] = field(default=(), init=False, repr=False)
    _separator: str = field(default="\x00", init=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in ("record", "fail"):
            raise ConfigError(f"unknown leakage mode {self.mode!r}: record or fail")
        self._needles = tuple({s.strip().casefold(): None for s in self.forbidden if s.strip()})
        # a character no forbidden string holds (a control character, or one of the private
        # use area): strings joined by it are matched each on its own
        held = set("".join(self._needles))
        self._separator = next(
            c for c in map(chr, itertools.chain(range(32), range(0xE000, 0xF900))) if c not in held
        )

    @classmethod
    def from_strings(cls, strings: Iterable[str], mode: LeakageMode = "record") -> LeakageGuard:
        return cls(tuple(strings), mode)

    @classmethod
    def from_file(cls, path: str | Path, mode: LeakageMode = "record") -> LeakageGuard:
        """Read forbidden strings, one per line; blank lines and ``#`` comments are skipped."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the forbidden-strings file: {exc}", file=p) from None
        lines = [ln.strip() for ln in text.splitlines()]
        return cls(tuple(ln for ln in lines if ln and not ln.startswith("#")), mode)

    def scan(self, text: str) -> Mapping[str, int]:
        """Fingerprint → number of occurrences, for each forbidden string in ``text``."""
        folded = text.casefold()
        hits: dict[str, int] = {}
        for needle in self._needles:
            count = folded.count(needle)
            if count:
                hits[fingerprint(needle)] = count
        return hits

    def may_occur_in(self, raw: bytes) -> bool:
        """Whether a forbidden string may occur in the strings of ``raw``, a JSON text: False
        only when none occurs in the text itself, casefolded, and the text holds no escape (a
        backslash) that could spell one otherwise. A quick test before the strings are parsed
        and scanned one by one: a string's characters stand unescaped and in a row in the text,
        and casefolding maps each character on its own."""
        if not self._needles:
            return False
        if b"\\" in raw:
            return True
        try:
            folded = raw.decode("utf-8").casefold()
        except UnicodeDecodeError:
            return True
        return any(needle in folded for needle in self._needles)

    def scan_each(self, texts: Iterable[str]) -> Mapping[str, int]:
        """:meth:`scan` of each string on its own, summed: the strings are joined by a
        character no forbidden string holds, so no occurrence spans two of them."""
        return self.scan(self._separator.join(texts))

    def check(
        self, text: str, *, where: Literal["prompt", "reply"], route: str, site: CallSite
    ) -> list[LeakageFinding]:
        """Record the findings in ``text``; in fail mode raise on the first hit."""
        found = [
            LeakageFinding(
                where=where, sha256=digest, count=count, route=route, **dataclasses.asdict(site)
            )
            for digest, count in self.scan(text).items()
        ]
        self.findings.extend(found)
        if found and self.mode == "fail":
            first = found[0]
            raise LeakageError(
                f"forbidden string sha256:{first.sha256[:16]} found in a {where} "
                f"({site.role}/{site.agent}, call {site.index})",
                timeline=site.timeline,
                tick=site.tick,
            )
        return found


@dataclass(frozen=True, slots=True)
class LeakageGuardModel(ModelWrapper):
    """Wrapper: scan every outgoing prompt and every reply with ``guard``."""

    guard: LeakageGuard

    async def request(self, request: ModelRequest) -> ModelResponse:
        prompt = "\n".join(m.content for m in request.chat())
        self.guard.check(prompt, where="prompt", route=self.route, site=request.site)
        handler = request.tool_handler
        if handler is not None:
            # what a tool returns is sent to the model too: scan it like a prompt
            async def guarded_tool(name: str, arguments: str) -> str:
                result = await handler(name, arguments)
                self.guard.check(result, where="prompt", route=self.route, site=request.site)
                return result

            request = dataclasses.replace(request, tool_handler=guarded_tool)
        try:
            response = await self.inner.request(request)
        except ModelError as exc:
            # a failed call's last reply is in its record, and so in the trace: scan it too
            reply = exc.call.get("reply")
            if isinstance(reply, str) and reply:
                self.guard.check(reply, where="reply", route=self.route, site=request.site)
            raise
        self.guard.check(response.text, where="reply", route=self.route, site=request.site)
        return response
