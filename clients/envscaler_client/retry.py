"""When a request may be sent again and how long to wait first: decisions shared by both clients.

A request is retried only when sending it twice cannot do anything twice:

- ``Replay.SAFE`` requests are idempotent on the gateway. Reads (GET), validation (changes
  nothing), delete (idempotent), reset (the state ends at the same start either way; a second
  reset marker may appear in the trajectory) and tool calls: every call carries a ``call_id``,
  and the gateway answers a repeated ``call_id`` with the stored result without executing the
  tool again. They are retried after connect errors, timeouts, dropped connections, and
  429/502/503 answers.
- ``Replay.UNSENT`` requests are retried only when nothing reached the server (the connection
  was never made). That is session creation: it has no idempotency key, so after a timeout or a
  dropped connection the session may exist, and sending again would open a second sandbox that
  nobody closes; a 429/502/503 may come from a proxy after the gateway created it. The caller
  gets the exception (with ``retry_after`` for capacity answers) and decides.

The back-off is the client's own, not the service's (`envscaler.common.backoff`): the client package is
installed alone, without the service's code, and its waits also honour ``Retry-After``.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

RETRY_STATUSES = frozenset({429, 502, 503})
# Failures after which the request may or may not have reached the server.
RETRYABLE_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
# Failures before anything was sent.
UNSENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class Replay(enum.Enum):
    """What a request tolerates being sent twice."""

    SAFE = "safe"
    UNSENT = "unsent"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential back-off with jitter that never waits less than ``Retry-After``."""

    attempts: int = 4
    """Tries in all, the first included (1: never retry)."""
    backoff: float = 0.25
    """Seconds before the first retry; doubled for each further one."""
    max_backoff: float = 8.0
    jitter: float = 0.5
    """Each wait is stretched by up to this fraction at random, so clients that failed together
    do not come back together."""
    max_retry_after: float = 30.0
    """A longer ``Retry-After`` is not waited for: the error is raised with its ``retry_after``."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")

    def delay(self, replay: Replay, attempt: int,
              outcome: httpx.Response | httpx.TransportError) -> float | None:
        """Seconds to wait before trying again after ``attempt`` (1-based) ended in ``outcome``,
        or None to stop there."""
        if attempt >= self.attempts:
            return None
        if isinstance(outcome, httpx.TransportError):
            retryable = UNSENT_ERRORS if replay is Replay.UNSENT else RETRYABLE_ERRORS
            return self._wait(attempt) if isinstance(outcome, retryable) else None
        if replay is Replay.UNSENT or outcome.status_code not in RETRY_STATUSES:
            return None
        after = retry_after(outcome.headers)
        if after is not None and after > self.max_retry_after:
            return None
        return self._wait(attempt, after or 0.0)

    def _wait(self, attempt: int, at_least: float = 0.0) -> float:
        base = max(at_least, min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1)))
        return base * (1.0 + self.jitter * random.random())


def retry_after(headers: httpx.Headers) -> float | None:
    """The ``Retry-After`` header in seconds (delay-seconds or an HTTP date), None when absent."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
