"""The gateway's HTTP server options: deadlines on reading each request and a connection limit.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) but waits for ever for a
request that never ends: 64 connections sending a header line now and then were held open
indefinitely, and a body can trickle just as well. `ReadDeadlineProtocol` (uvicorn's httptools
protocol) closes a connection whose request head is not complete ``ENVSCALER_HEADER_TIMEOUT``
seconds after the connection opened or the request began, or whose body is not complete
``ENVSCALER_BODY_TIMEOUT`` seconds after its head, answering 408 first when no answer has
begun. ``ENVSCALER_MAX_CONNECTIONS`` is uvicorn's ``limit_concurrency``: beyond that many
connections or requests in progress, requests answer 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from envscaler.server.settings import Settings

TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
             b"connection: close\r\ncontent-length: %d\r\n\r\n%s")


def _timed_out(part: str, setting: str) -> bytes:
    message = f"the request {part} did not arrive within {setting} seconds"
    body = json.dumps({"ok": False, "error": {"type": "Timeout", "message": message}})
    return TIMED_OUT % (len(body), body.encode())


HEAD_TIMED_OUT = _timed_out("head", "ENVSCALER_HEADER_TIMEOUT")
BODY_TIMED_OUT = _timed_out("body", "ENVSCALER_BODY_TIMEOUT")


class ReadDeadlineProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, head_timeout: float, body_timeout: float,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.read_deadline: asyncio.TimerHandle | None = None

    def _arm(self, seconds: float, answer: bytes) -> None:
        self._disarm()
        self.read_deadline = self.loop.call_later(seconds, self._timed_out, answer)

    def _disarm(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None

    def _timed_out(self, answer: bytes) -> None:
        self.read_deadline = None
        if self.transport.is_closing():
            return
        cycle = getattr(self, "cycle", None)
        if cycle is None or not cycle.response_started:  # an answer begun is cut, not mixed
            self.transport.write(answer)
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.head_timeout, HEAD_TIMED_OUT)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(self.head_timeout, HEAD_TIMED_OUT)

    def on_headers_complete(self) -> None:
        self._arm(self.body_timeout, BODY_TIMED_OUT)  # disarmed by the body's end
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def server_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of ``uvicorn.Config`` for the gateway; picklable, for worker processes."""
    return {"http": partial(ReadDeadlineProtocol, head_timeout=settings.header_timeout,
                            body_timeout=settings.body_timeout),
            "limit_concurrency": settings.max_connections}


def gateway_options(settings: Settings) -> dict[str, Any]:
    """`server_options`, and uvicorn's logging at the gateway's log level: how `envscaler serve`
    and the embedded gateway run it. Access lines only when asked (``ENVSCALER_ACCESS_LOG``) and
    logged (INFO or below): else uvicorn would still format each one's client and path for
    nothing (a few per cent of a tool call's CPU)."""
    return {"log_level": settings.log_level.lower(),
            "access_log": settings.access_log and _logs_info(settings.log_level),
            **server_options(settings)}


def _logs_info(level: str) -> bool:
    number = logging.getLevelName(level.upper())
    return not isinstance(number, int) or number <= logging.INFO  # unknown to logging: uvicorn's
