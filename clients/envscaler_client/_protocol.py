"""The one implementation of requests, answers and retries, with no I/O (sans-I/O).

An operation is a generator (a *flow*, like ``httpx.Auth.auth_flow``) that yields what to do next
and is sent what happened:

- it yields an `ApiRequest` to send and is sent the ``httpx.Response``, or the
  ``httpx.TransportError`` when no answer came;
- it yields a float to sleep that many seconds and is sent None;
- it returns the parsed result, or raises an `EnvScalerError`.

`EnvClient` and `AsyncEnvClient` each drive flows in a dozen lines (`drive_sync` / `drive_async`),
so request building, answer parsing and the retry policy exist once and only the transport call
and the sleep differ between sync and async.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import ValidationError

from envscaler_client import __version__
from envscaler_client.errors import EnvScalerError, error_from_response, transport_error
from envscaler_client.retry import Replay, RetryPolicy

log = logging.getLogger("envscaler.client")

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
"""The sync client's: one thread uses one connection at a time."""
# Below uvicorn's keep-alive timeout (5 s), so the gateway never closes a connection being reused.
KEEPALIVE_EXPIRY = 4.0
UNCAPPED = httpx.Limits(max_connections=None, max_keepalive_connections=None,
                        keepalive_expiry=KEEPALIVE_EXPIRY)
"""The async client's: a connection per concurrent request, however many."""


def connection_limits(sessions: int) -> httpx.Limits:
    """Limits for ``sessions`` sessions in use at once (a batch): a session sends one request at
    a time, so a connection each, all kept alive between its requests."""
    if sessions < 1:
        raise ValueError("sessions must be at least 1")
    return httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions,
                        keepalive_expiry=KEEPALIVE_EXPIRY)

Outcome = httpx.Response | httpx.TransportError


@dataclass(frozen=True)
class ApiRequest(Generic[T]):
    """One gateway request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, str] | None = None
    replay: Replay = Replay.SAFE
    token: str | None = None
    """Sent instead of the client's API key (a session's agent token)."""
    answers: frozenset[int] = field(default_factory=frozenset)
    """Error statuses whose body is the answer (``/readyz`` answers 503 when not ready)."""

    def send_kwargs(self) -> dict[str, Any]:
        """Arguments of ``httpx.Client.request`` / ``httpx.AsyncClient.request``."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        return {"method": self.method, "url": self.path, "json": self.json, "params": self.params,
                "headers": headers}


Flow = Generator["ApiRequest[Any] | float", "Outcome | None", T]


def exchange(request: ApiRequest[T], policy: RetryPolicy) -> Flow[T]:
    """Send ``request`` until it gets an answer or the policy gives up; the parsed answer."""
    attempt = 0
    while True:
        attempt += 1
        outcome = yield request
        assert outcome is not None
        answered = isinstance(outcome, httpx.Response) and outcome.status_code in request.answers
        delay = None if answered else policy.delay(request.replay, attempt, outcome)
        if delay is None:
            return _answer(request, outcome)
        reason = (f"HTTP {outcome.status_code}" if isinstance(outcome, httpx.Response)
                  else type(outcome).__name__)
        log.info("retrying %s %s after %s (attempt %d of %d) in %.2f s", request.method,
                 request.path, reason, attempt + 1, policy.attempts, delay)
        yield delay


def _answer(request: ApiRequest[T], outcome: Outcome) -> T:
    if isinstance(outcome, httpx.TransportError):
        raise transport_error(outcome) from outcome
    if not (outcome.is_success or outcome.status_code in request.answers):
        raise error_from_response(outcome)
    try:
        return request.parse(outcome.json())
    except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
        raise EnvScalerError(f"{request.method} {request.path}: not the gateway's answer: {exc}",
                             type="InvalidResponse", status=outcome.status_code) from exc


@dataclass(frozen=True)
class ClientConfig:
    """Everything both clients are built from."""

    base_url: str
    api_key: str | None
    connect_timeout: float
    read_timeout: float
    retry: RetryPolicy
    limits: httpx.Limits

    def http_kwargs(self) -> dict[str, Any]:
        """Arguments of ``httpx.Client`` / ``httpx.AsyncClient``: one pooled client per client."""
        headers = {"User-Agent": f"envscaler-client/{__version__}"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        # Waiting for a pooled connection may take as long as a request; writes are small.
        timeout = httpx.Timeout(self.read_timeout, connect=self.connect_timeout)
        return {"base_url": self.base_url, "headers": headers, "timeout": timeout,
                "limits": self.limits}


class ClientBase:
    """Construction shared by `EnvClient` and `AsyncEnvClient`; each opens its own httpx client.

    ``limits``: the connections it may hold (None: the class's ``default_limits``)."""

    default_limits = DEFAULT_LIMITS

    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *,
                 connect_timeout: float = 5.0, read_timeout: float = 60.0,
                 retry: RetryPolicy | None = None, limits: httpx.Limits | None = None) -> None:
        self.config = ClientConfig(base_url=base_url, api_key=api_key,
                                   connect_timeout=connect_timeout, read_timeout=read_timeout,
                                   retry=retry or RetryPolicy(),
                                   limits=limits or self.default_limits)
        self._http = self._open()

    def _open(self) -> Any:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return self.config.base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"


def drive_sync(http: httpx.Client, flow: Flow[T]) -> T:
    try:
        step = next(flow)
        while True:
            if isinstance(step, ApiRequest):
                outcome: Outcome
                try:
                    outcome = http.request(**step.send_kwargs())
                except httpx.TransportError as exc:
                    outcome = exc
                step = flow.send(outcome)
            else:
                time.sleep(step)
                step = flow.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def drive_async(http: httpx.AsyncClient, flow: Flow[T]) -> T:
    try:
        step = next(flow)
        while True:
            if isinstance(step, ApiRequest):
                outcome: Outcome
                try:
                    outcome = await http.request(**step.send_kwargs())
                except httpx.TransportError as exc:
                    outcome = exc
                step = flow.send(outcome)
            else:
                await asyncio.sleep(step)
                step = flow.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
