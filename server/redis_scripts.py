"""A lean Redis client for the two scripts on every tool call's path (`server.store`'s
``LOCK_AND_LOAD`` and ``COMMIT``); everything else goes through redis-py.

Why: redis-py spent about 150 us of the gateway's CPU per scripted command here (a task per send
for the socket timeout, the connection pool, encoding each argument through several layers,
observability hooks), five times the cost of the round trip itself, and a tool call makes two;
that was a third of the gateway's CPU per call (measured with ``envscaler bench``).

How: one connection per process, multiplexed: each command is written as soon as it is made and
its reply future queued; replies come back in order and are matched to the queue, parsed by
hiredis (C). Under load many replies arrive in one read.

Semantics kept from the redis-py client the gateway configures (`server.app`):

- a command that gets no reply within ``timeout`` raises `redis.exceptions.TimeoutError`; the
  connection is then dropped (what else it carried fails with it), as redis-py does;
- a connection that cannot be made, or drops, raises `redis.exceptions.ConnectionError`; the
  command is retried (3 times, backoff from 10 ms doubling to 0.5 s, jittered) on a new
  connection, as the gateway's redis-py ``Retry`` does, so a restarted Redis is reconnected to;
- a script unknown to Redis (``NOSCRIPT``, e.g. after a restart) is sent again whole (``EVAL``);
- errors are redis-py's exception classes, so ``except RedisError`` handlers are unchanged;
- replies are decoded as redis-py's ``decode_responses=True`` does (UTF-8 strings).

Only ``redis://`` and ``unix://`` URLs (with optional password, user and db); for any other
(``rediss://``) `ScriptClient.for_url` returns None and the caller keeps using redis-py.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from typing import Any, Protocol

import hiredis
from redis.asyncio.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

RETRIES = 3
BACKOFF_BASE = 0.01
BACKOFF_CAP = 0.5


class Script(Protocol):
    """A Lua script: redis-py's ``AsyncScript`` (``Redis.register_script``) is one."""

    sha: str
    script: str


def _encode(args: list[Any]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int | float):
            arg = repr(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader(replyError=ResponseError, encoding="utf-8")
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            if not self.pending:  # a reply nobody asked for: the stream is out of step
                self.abort(RedisConnectionError("Redis sent an unexpected reply"))
                return
            future = self.pending.popleft()
            if not future.done():
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = RedisConnectionError(f"connection to Redis lost: {exc or 'closed'}")
        self._fail_all(self.lost)

    def abort(self, exc: BaseException) -> None:
        self.lost = exc
        if self.transport is not None:
            self.transport.abort()
        self._fail_all(exc)

    def _fail_all(self, exc: BaseException) -> None:
        while self.pending:
            future = self.pending.popleft()
            if not future.done():
                future.set_exception(exc)

    def send(self, data: bytes) -> asyncio.Future[Any]:
        assert self.transport is not None
        future = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        self.transport.write(data)
        return future


class ScriptClient:
    def __init__(self, connect: dict[str, Any], timeout: float, connect_timeout: float) -> None:
        self._connect = connect
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._connection: _Connection | None = None
        self._connecting: asyncio.Lock | None = None

    @classmethod
    def for_url(cls, url: str, timeout: float, connect_timeout: float) -> ScriptClient | None:
        options = parse_url(url)
        if options.get("connection_class") is SSLConnection:
            return None
        return cls(options, timeout, connect_timeout)

    async def evalsha(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        """``EVALSHA`` (``EVAL`` when Redis does not know the script); the decoded reply."""
        try:
            return await self._command(["EVALSHA", script.sha, len(keys), *keys, *args])
        except NoScriptError:
            return await self._command(["EVAL", script.script, len(keys), *keys, *args])

    async def _command(self, args: list[Any]) -> Any:
        data = _encode(args)
        for attempt in range(RETRIES + 1):
            try:
                reply = await self._roundtrip(data)
            except RedisConnectionError:
                if attempt == RETRIES:
                    raise
                await asyncio.sleep(min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt) * random.random())
                continue
            if isinstance(reply, ResponseError):
                if str(reply).startswith("NOSCRIPT"):
                    raise NoScriptError(str(reply))
                raise reply
            return reply
        raise AssertionError("unreachable")

    async def _roundtrip(self, data: bytes) -> Any:
        connection = await self._connected()
        future = connection.send(data)
        try:
            async with asyncio.timeout(self.timeout):
                return await future
        except TimeoutError as exc:  # the deadline passed: drop the connection, as redis-py does
            error = RedisTimeoutError("Timeout reading from Redis")
            connection.abort(error)
            raise error from exc

    async def _connected(self) -> _Connection:
        connection = self._connection
        if connection is not None and connection.lost is None:
            return connection
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._connection is not None and self._connection.lost is None:
                return self._connection
            self._connection = await self._open()
            return self._connection

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        options = self._connect
        try:
            async with asyncio.timeout(self.connect_timeout):
                if "path" in options:
                    _, connection = await loop.create_unix_connection(_Connection, options["path"])
                else:
                    _, connection = await loop.create_connection(
                        _Connection, options.get("host", "localhost"), options.get("port", 6379))
        except (OSError, TimeoutError) as exc:
            raise RedisConnectionError(f"cannot connect to Redis: {exc!r}") from exc
        setup = []
        if options.get("password") is not None:
            user = options.get("username")
            setup.append(["AUTH", *([user] if user else []), options["password"]])
        if options.get("db"):
            setup.append(["SELECT", options["db"]])
        for command in setup:
            try:
                async with asyncio.timeout(self.timeout):
                    reply = await connection.send(_encode(command))
            except (TimeoutError, RedisConnectionError) as exc:
                connection.abort(RedisConnectionError("Redis did not answer the connection set-up"))
                raise RedisConnectionError(f"Redis did not answer {command[0]}: {exc!r}") from exc
            if isinstance(reply, ResponseError):
                connection.abort(RedisConnectionError(str(reply)))
                raise reply
        return connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.abort(RedisConnectionError("client closed"))
            self._connection = None
