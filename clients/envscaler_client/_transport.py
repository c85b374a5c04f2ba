"""The async client's HTTP/1.1 transport: a connection pool whose cost per request does not grow
with its size, under ``httpx.AsyncClient`` (which still builds requests, answers and errors).

httpx's own pool (httpcore) walks every connection and every waiting request on each request and
each answer, so one process driving hundreds of sessions spent most of its CPU there, more the more
keep-alive connections it held (`envscaler.bench.client_transport` measures it). Here idle connections are a
stack (the most recently used is taken first; the oldest expire from the bottom) and requests that
wait for a connection are a queue: taking and giving back a connection is O(1). Answers are parsed
by ``httptools`` (the C parser uvicorn serves with); requests are small and written in one piece.

Limits are ``httpx.Limits``: ``max_connections`` (None: no cap) bounds the open connections, and a
request beyond it waits (``pool`` timeout), logged once per cap, so a cap is never silent;
``max_keepalive_connections`` bounds the idle ones; ``keepalive_expiry`` closes idle connections
before the gateway's own keep-alive timeout (uvicorn's 5 s) would.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl
import time
from dataclasses import dataclass

import httptools
import httpx

log = logging.getLogger("envscaler.client")

Origin = tuple[str, str, int]
# (origin, cap) pairs already logged: a client per trajectory (verl) would otherwise log each time.
_warned: set[tuple[Origin, int | None]] = set()


@dataclass(frozen=True)
class Timeouts:
    """A request's timeouts, as httpx hands them to a transport (None: no limit)."""

    connect: float | None
    read: float | None
    pool: float | None

    @classmethod
    def of(cls, request: httpx.Request) -> Timeouts:
        given = request.extensions.get("timeout", {})
        return cls(given.get("connect"), given.get("read"), given.get("pool"))


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection, one request at a time; it is also the parser's
    callbacks (``on_header``, ``on_body``, ``on_message_complete``)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.open = True
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._complete = False
        self._status = 0
        self._keep_alive = True
        self._waiter: asyncio.Future[httpx.Response] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        # The parser's status and keep-alive hold only until it is fed again: read them now.
        self._complete = True
        self._status = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # bytes nobody asked for: this connection cannot be trusted again
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed answer: {exc}"))
            return
        if self._complete:
            self._finish()

    def _finish(self) -> None:
        waiter = self._waiter
        assert waiter is not None
        response = httpx.Response(self._status, headers=self._headers,
                                  content=b"".join(self._body),
                                  extensions={"http_version": b"HTTP/1.1"})
        self._parser = httptools.HttpResponseParser(self)
        self._headers, self._body, self._complete = [], [], False
        self._waiter = None
        waiter.set_result(response)

    def eof_received(self) -> bool:
        self.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self._fail(httpx.RemoteProtocolError(
            "the gateway closed the connection without an answer" +
            (f": {exc}" if exc else "")))

    def _fail(self, error: Exception) -> None:
        self.close()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self._waiter = None

    def close(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()

    @property
    def reusable(self) -> bool:
        return self.open and self._keep_alive and self._waiter is None

    async def send(self, head: bytes, body: bytes, read_timeout: float | None) -> httpx.Response:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(head + body)
        try:
            return await asyncio.wait_for(self._waiter, read_timeout)
        except TimeoutError:
            self.close()
            raise httpx.ReadTimeout("no answer within the read timeout") from None
        except asyncio.CancelledError:
            self.close()  # an answer may still come: the connection is out of step
            raise


def _head(request: httpx.Request, body: bytes) -> bytes:
    lines = [b"%s %s HTTP/1.1" % (request.method.encode(), request.url.raw_path)]
    lines += [b"%s: %s" % pair for pair in request.headers.raw]
    if body and "content-length" not in request.headers:
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n"


class Pool:
    """The connections of one origin (scheme, host, port)."""

    def __init__(self, origin: Origin, limits: httpx.Limits,
                 ssl_context: ssl.SSLContext | None) -> None:
        self.origin = origin
        self.limits = limits
        self.ssl_context = ssl_context
        self.idle: collections.deque[Connection] = collections.deque()
        self.waiters: collections.deque[asyncio.Future[Connection | None]] = collections.deque()
        self.count = 0  # open connections, idle or busy, and ones being opened

    def _expire(self) -> None:
        expiry = self.limits.keepalive_expiry
        if expiry is None:
            return
        oldest = time.monotonic() - expiry
        while self.idle and self.idle[0].idle_since < oldest:
            self._drop(self.idle.popleft())

    def _drop(self, connection: Connection) -> None:
        connection.close()
        self.count -= 1

    def _full(self) -> bool:
        cap = self.limits.max_connections
        return cap is not None and self.count >= cap

    async def acquire(self, timeouts: Timeouts) -> Connection:
        self._expire()
        while self.idle:
            connection = self.idle.pop()
            if connection.reusable:
                return connection
            self._drop(connection)
        if self._full():
            handed = await self._wait(timeouts.pool)
            if handed is not None:
                return handed
        self.count += 1
        try:
            return await self._connect(timeouts.connect)
        except BaseException:
            self.count -= 1
            self._wake()
            raise

    async def _wait(self, timeout: float | None) -> Connection | None:
        """Until a connection is given back (it) or closed (None: a slot to open one)."""
        if (self.origin, self.limits.max_connections) not in _warned:
            _warned.add((self.origin, self.limits.max_connections))
            log.warning("connection cap reached: max_connections=%s to %s://%s:%d; requests "
                        "beyond it wait (raise limits.max_connections for larger batches)",
                        self.limits.max_connections, *self.origin)
        waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            raise httpx.PoolTimeout("no connection became free within the pool timeout") from None
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed over as we were cancelled
                handed = waiter.result()
                if handed is None:
                    self._wake()  # the slot to open a connection goes to the next in line
                else:
                    self.release(handed)
            raise
        finally:
            if not waiter.done() or waiter.cancelled():  # nothing handed over: leave the line
                waiter.cancel()
                try:
                    self.waiters.remove(waiter)
                except ValueError:
                    pass  # already taken off by a release, which skips cancelled waiters

    async def _connect(self, timeout: float | None) -> Connection:
        scheme, host, port = self.origin
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(loop.create_connection(
                Connection, host, port, ssl=self.ssl_context,
                server_hostname=host if self.ssl_context else None), timeout)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {scheme}://{host}:{port} timed out") \
                from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {scheme}://{host}:{port}: {exc}") \
                from exc
        return connection

    def release(self, connection: Connection) -> None:
        """Give a connection back: to the first waiting request, else to the idle stack."""
        if not connection.reusable:
            self._drop(connection)
            self._wake()
            return
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        keep = self.limits.max_keepalive_connections
        if keep is not None and len(self.idle) >= keep:
            self._drop(connection)
            return
        connection.idle_since = time.monotonic()
        self.idle.append(connection)

    def _wake(self) -> None:
        """A connection closed: the first waiting request may open one in its place."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        while self.idle:
            self._drop(self.idle.pop())


class PoolTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` async transport over `Pool`\\ s, one per origin."""

    def __init__(self, limits: httpx.Limits) -> None:
        self.limits = limits
        self._pools: dict[Origin, Pool] = {}
        self._ssl: ssl.SSLContext | None = None

    def _pool(self, url: httpx.URL) -> Pool:
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        pool = self._pools.get(origin)
        if pool is None:
            if url.scheme == "https" and self._ssl is None:
                self._ssl = httpx.create_ssl_context()  # httpx's own verification
            pool = self._pools[origin] = Pool(origin, self.limits,
                                              self._ssl if url.scheme == "https" else None)
        return pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"not an http(s) URL: {request.url}")
        body = await request.aread()
        timeouts = Timeouts.of(request)
        pool = self._pool(request.url)
        connection = await pool.acquire(timeouts)
        try:
            response = await connection.send(_head(request, body), body, timeouts.read)
        finally:
            pool.release(connection)
        return response

    async def aclose(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
