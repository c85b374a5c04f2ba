"""The gateway's HTTP server options: a deadline on each request's head and a connection limit.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) but waits for ever for a
request head that never ends: 64 connections sending a header line now and then were held open
indefinitely. `HeadTimeoutProtocol` (uvicorn's httptools protocol) closes a connection whose
request head is not complete ``ENVSCALER_HEADER_TIMEOUT`` seconds after the connection opened or
the request began, answering 408 first. ``ENVSCALER_MAX_CONNECTIONS`` is uvicorn's
``limit_concurrency``: beyond that many connections or requests in progress, requests answer 503.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from server.settings import Settings

TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
             b"connection: close\r\ncontent-length: %d\r\n\r\n%s")
TIMED_OUT_BODY = (b'{"ok":false,"error":{"type":"Timeout","message":"the request head did not '
                  b'arrive within ENVSCALER_HEADER_TIMEOUT seconds"}}')


class HeadTimeoutProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, head_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timeout = head_timeout
        self.head_deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self.head_deadline = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self.head_deadline is not None:
            self.head_deadline.cancel()
            self.head_deadline = None

    def _head_timed_out(self) -> None:
        self.head_deadline = None
        if not self.transport.is_closing():
            self.transport.write(TIMED_OUT % (len(TIMED_OUT_BODY), TIMED_OUT_BODY))
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def server_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of ``uvicorn.Config`` for the gateway; picklable, for worker processes."""
    return {"http": partial(HeadTimeoutProtocol, head_timeout=settings.header_timeout),
            "limit_concurrency": settings.max_connections}
