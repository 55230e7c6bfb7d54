"""The one place that retries model calls: tenacity around a per-attempt no-progress timeout.

Retried, by the rules the openai client applies when it retries itself: HTTP 429, 408, 409
(a lock timeout) and 5xx, unless an ``x-should-retry`` header says otherwise (it may also ask
for a retry of any other status); timeouts, connection errors and unreadable response bodies.
Waits grow exponentially with jitter; a ``Retry-After`` (seconds or HTTP date) or
``retry-after-ms`` header replaces the computed wait, capped. Every failed attempt is reported
to ``on_error`` as a `CallErrorEntry`, with the wait that followed it and the limit it ran under.

An attempt times out after ``timeout_s`` *without progress*: an attempt that streams calls
`Attempt.progress` on every chunk and so may run as long as tokens keep coming; one that does
not stream has ``timeout_s`` in all. With ``escalate`` above 1 (local routes), a timeout
multiplies the next attempt's limit, since the same request against the same slow server would
only be cut again. No attempt starts, or goes on, past the policy's ``deadline``, and no retry
waits past it: a wait that would is not waited, and the call fails at once.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

import anyio
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from worldsim.domain.config import RetrySettings
from worldsim.models.call import AttemptFailed, CallErrorEntry
from worldsim.models.limits import AdaptiveLimiter

__all__ = [
    "Attempt",
    "DeadlineReached",
    "RetryPolicy",
    "TransientError",
    "call_with_retries",
    "classify",
    "parse_retry_after",
]

T = TypeVar("T")

_MESSAGE_LIMIT = 300

_SETTINGS = RetrySettings()
"""A run config's defaults (``retry:``): the policy's own defaults are these, said once."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try: attempts, the per-attempt timeout and the backoff.

    ``sleep`` is the awaitable the waits go through; tests pass a recorder to observe waits
    without spending them.
    """

    max_attempts: int = _SETTINGS.max_attempts
    timeout_s: float = _SETTINGS.timeout_s
    backoff_initial_s: float = _SETTINGS.backoff_initial_s
    backoff_max_s: float = _SETTINGS.backoff_max_s
    jitter_s: float = _SETTINGS.jitter_s
    retry_after_cap_s: float = _SETTINGS.retry_after_cap_s
    escalate: float = 1.0
    """Factor a timed-out attempt's limit is multiplied by for the next one (1: unchanged)."""
    deadline: float | None = None
    """A ``time.monotonic()`` instant no attempt may run past (``None``: none)."""
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if self.escalate < 1:
            raise ValueError("escalate must be at least 1")

    @classmethod
    def from_settings(cls, settings: RetrySettings | None) -> RetryPolicy:
        """The policy a run config's ``retry:`` block sets (the defaults without one)."""
        return cls() if settings is None else cls(**settings.model_dump())

    def with_deadline(self, seconds: float | None) -> RetryPolicy:
        """This policy with a deadline ``seconds`` from now (unchanged for ``None``)."""
        if seconds is None:
            return self
        return replace(self, deadline=time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds left before the deadline (infinite without one)."""
        if self.deadline is None:
            return math.inf
        return self.deadline - time.monotonic()


class Attempt:
    """One attempt's number and limit; `progress` pushes its no-progress timeout back."""

    def __init__(self, number: int, timeout_s: float, scope: anyio.CancelScope, end: float):
        self.number = number
        self.timeout_s = timeout_s
        self._scope = scope
        self._end = end  # the deadline on the event loop's clock (inf: none)

    @property
    def timed_out(self) -> bool:
        """Whether the attempt's own limit cut it (rather than the run stopping around it)."""
        return self._scope.cancel_called

    def progress(self) -> None:
        """Something arrived: the attempt has ``timeout_s`` again (never past the deadline).

        The limit moves only once it would move by 1 % of ``timeout_s``: moving it reschedules
        a timer, and a stream's chunks arrive far more often than that matters, so an attempt
        without progress ends between 0.99 and 1 times ``timeout_s`` after its last chunk.
        """
        if self._scope.cancel_called:  # too late: the limit has passed, the attempt is ending
            return
        wanted = min(anyio.current_time() + self.timeout_s, self._end)
        if wanted - self._scope.deadline >= 0.01 * self.timeout_s:
            self._scope.deadline = wanted


class DeadlineReached(AttemptFailed):
    """The run's deadline left no time for another attempt; ``rate_limited`` when it ran out
    while waiting the ``Retry-After`` the route asked for."""

    def __init__(self, entry: CallErrorEntry, *, rate_limited: bool = False) -> None:
        super().__init__(entry)
        self.rate_limited = rate_limited


class TransientError(AttemptFailed):
    """A failed attempt worth retrying."""

    def __init__(self, entry: CallErrorEntry, retry_after: float | None = None) -> None:
        super().__init__(entry)
        self.retry_after = retry_after


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``retry-after`` as seconds or an HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def classify(
    exc: BaseException, attempt: int, redact: Callable[[str], str] = str
) -> tuple[CallErrorEntry, bool, float | None]:
    """An attempt's failure as (record entry, retryable, server-requested wait).

    The message is the exception's text (for an HTTP error, the server's body) passed through
    ``redact`` before it is shortened, so a key fragment cannot survive by being cut short.
    """
    import openai  # imported with the route that raised it: an offline run never loads it

    message = _short(redact(str(exc)))
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return CallErrorEntry(attempt=attempt, kind="timeout", message=message), True, None
    if isinstance(exc, openai.APIConnectionError):
        return CallErrorEntry(attempt=attempt, kind="connection", message=message), True, None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers)
        if status == 429:
            kind, retry = "rate_limit", True
        elif status == 408:
            kind, retry = "timeout", True
        elif status == 409:
            kind, retry = "conflict", True
        elif status >= 500:
            kind, retry = "server_error", True
        else:
            kind, retry = "client_error", False
        told = exc.response.headers.get("x-should-retry")
        if told in ("true", "false"):  # the server's word wins, as in the openai client
            retry = told == "true"
        entry = CallErrorEntry(attempt=attempt, kind=kind, status=status, message=message)
        return entry, retry, retry_after
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return CallErrorEntry(attempt=attempt, kind="bad_response", message=message), True, None
    if type(exc) is openai.APIError and isinstance(exc.body, dict):  # an error event mid-stream
        told = exc.body.get("type")
        if told in ("server_error", "overloaded_error", "api_error", "rate_limit_error"):
            kind = "rate_limit" if told == "rate_limit_error" else "server_error"
            return CallErrorEntry(attempt=attempt, kind=kind, message=message), True, None
    return CallErrorEntry(attempt=attempt, kind="client_error", message=message), False, None


async def call_with_retries(
    attempt_fn: Callable[[Attempt], Awaitable[T]],
    policy: RetryPolicy,
    on_error: Callable[[CallErrorEntry], None],
    *,
    limiter: AdaptiveLimiter | anyio.CapacityLimiter | None = None,
    first_attempt: int = 1,
) -> T:
    """Run ``attempt_fn(attempt)`` until it succeeds, under ``policy``.

    ``attempt_fn`` raises `TransientError` for a failure worth retrying; anything else
    propagates at once. When the attempts run out the last `TransientError` propagates; when
    the deadline leaves no time for the next one (or the wait before it, a ``Retry-After``
    included, would end past the deadline: nothing waits past it), `DeadlineReached`. Each
    attempt holds one ``limiter`` token while it runs (not while it waits to retry), and its
    timeout starts once it holds the token. Attempts are numbered from ``first_attempt``.
    """
    backoff = wait_exponential_jitter(
        multiplier=policy.backoff_initial_s, max=policy.backoff_max_s, jitter=policy.jitter_s
    )

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        told = exc.retry_after if isinstance(exc, TransientError) else None
        seconds = float(backoff(state)) if told is None else min(told, policy.retry_after_cap_s)
        left = policy.remaining()
        if state.attempt_number < policy.max_attempts and seconds >= left:
            raise _no_time_to_wait(exc, told, left)
        return seconds

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, TransientError) and state.next_action is not None:
            exc.entry.wait_s = round(state.next_action.sleep, 6)

    def record(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, TransientError):
            on_error(exc.entry)

    async def sleep(seconds: float) -> None:
        await policy.sleep(seconds)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts),
        wait=wait,
        retry=retry_if_exception_type(TransientError),
        sleep=sleep,
        after=record,
        before_sleep=before_sleep,
        reraise=True,
    )
    number = first_attempt - 1
    timeout_s = policy.timeout_s
    async for attempt in retrying:
        with attempt:
            number += 1
            if policy.remaining() <= 0:
                raise DeadlineReached(
                    CallErrorEntry(
                        attempt=number - 1,
                        kind="deadline",
                        message="the run's deadline left no time for another attempt",
                    )
                )
            try:
                if limiter is None:
                    result = await _one_attempt(attempt_fn, number, timeout_s, policy)
                elif isinstance(limiter, AdaptiveLimiter):
                    result = await _adaptive_attempt(limiter, attempt_fn, number, timeout_s, policy)
                else:
                    async with limiter:
                        result = await _one_attempt(attempt_fn, number, timeout_s, policy)
            except TransientError as exc:
                if exc.entry.kind == "timeout":
                    timeout_s *= policy.escalate
                raise
        if attempt.retry_state.outcome is not None and not attempt.retry_state.outcome.failed:
            return result
    raise AssertionError("tenacity ended without an outcome")  # pragma: no cover


def _no_time_to_wait(
    exc: BaseException | None, retry_after: float | None, left: float
) -> DeadlineReached:
    """The wait before the next attempt (``retry_after``: the one the route asked for) would
    end past the deadline: no wait, no attempt."""
    number = exc.entry.attempt if isinstance(exc, AttemptFailed) else 0
    if retry_after is None:
        message = "the run's deadline left no time for another attempt"
    else:
        message = (
            "the run's deadline ran out while waiting on the route's rate limit (it asked to "
            f"wait Retry-After {retry_after:g} s; {max(left, 0.0):.1f} s were left)"
        )
    entry = CallErrorEntry(attempt=number, kind="deadline", message=message)
    return DeadlineReached(entry, rate_limited=retry_after is not None)


_PUSHBACK = frozenset({"rate_limit", "server_error", "timeout"})
"""The failures that say the server is overloaded: they shrink a route's limit."""


async def _adaptive_attempt(
    limiter: AdaptiveLimiter,
    attempt_fn: Callable[[Attempt], Awaitable[T]],
    number: int,
    timeout_s: float,
    policy: RetryPolicy,
) -> T:
    """One attempt holding a connection of ``limiter``, telling it how the server answered:
    a reply grows the limit, a 429, 5xx or timeout shrinks it (`AdaptiveLimiter`)."""
    async with limiter as ticket:
        try:
            result = await _one_attempt(attempt_fn, number, timeout_s, policy)
        except TransientError as exc:
            if exc.entry.kind in _PUSHBACK:
                pause = exc.retry_after
                if pause is not None:
                    pause = min(pause, policy.retry_after_cap_s)
                limiter.congested(ticket, exc.entry.kind, pause)
            raise
        limiter.succeeded(ticket)
        return result


async def _one_attempt(
    attempt_fn: Callable[[Attempt], Awaitable[T]],
    number: int,
    timeout_s: float,
    policy: RetryPolicy,
) -> T:
    remaining = policy.remaining()
    end = anyio.current_time() + remaining
    try:
        with anyio.fail_after(min(timeout_s, remaining)) as scope:
            return await attempt_fn(Attempt(number, timeout_s, scope, end))
        # the scope caught its own cancellation but its deadline had moved on since (progress
        # reported as the cancellation was on its way): the attempt timed out all the same
        raise TimeoutError
    except TimeoutError as exc:
        cut = policy.remaining() <= 0
        message = (
            "stopped at the run's deadline"
            if cut
            else f"no progress for {timeout_s:g} s (no token, or no reply)"
        )
        entry = CallErrorEntry(attempt=number, kind="timeout", message=message, timeout_s=timeout_s)
        raise TransientError(entry) from exc


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"
