"""A lean Redis client for the two scripts on every tool call's path (`envscaler.server.store`'s
``LOCK_AND_LOAD`` and ``COMMIT``); everything else goes through redis-py.

Why: redis-py spent about 150 us of the gateway's CPU per scripted command here (a task per send
for the socket timeout, the connection pool, encoding each argument through several layers,
observability hooks), five times the cost of the round trip itself, and a tool call makes two;
that was a third of the gateway's CPU per call (measured with ``envscaler bench``).

How: a pool of connections, one command in flight on each (as redis-py's pool): a command is
written as soon as it is made on an idle connection (a new one when none is idle), its reply
parsed by hiredis (C), and the connection goes back to the pool. Not one connection multiplexed:
there a command whose reply is slow (a stalled socket, a long reply) held up every reply behind
it, and its timeout, which must drop the connection to keep replies in step, failed every
command in flight on it, other sessions' included.

Semantics kept from the redis-py client the gateway configures (`envscaler.server.app`):

- a command (or a new connection's ``AUTH`` / ``SELECT``) that gets no reply within ``timeout``
  raises `redis.exceptions.TimeoutError`, never retried; its connection is then dropped, and only
  that command fails (a timer per connection, not ``asyncio.timeout``, which cost more than the
  rest of the client);
- a connection that cannot be made, or drops, raises `redis.exceptions.ConnectionError`; the
  command is retried on a new connection by the very ``Retry`` the gateway gives redis-py
  (`reconnecting`), so a restarted Redis is reconnected to;
- a script unknown to Redis (``NOSCRIPT``, e.g. after a restart) is sent again whole (``EVAL``);
- errors are redis-py's exception classes, so ``except RedisError`` handlers are unchanged;
- replies are decoded as redis-py's ``decode_responses=True`` does (UTF-8 strings).

Only ``redis://`` and ``unix://`` URLs (with optional password, user and db); for any other
(``rediss://``, a Redis Cluster's) `ScriptClient.for_url` returns None and the caller keeps using
redis-py.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

import hiredis
from redis.asyncio.connection import SSLConnection, parse_url
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from envscaler.common.redisclient import is_cluster

TIMER_SLACK = 0.001  # the event loop's timers have a resolution of a millisecond
# Connections kept open between commands (about one per request in flight); beyond, one is
# closed after its command, so that a burst does not leave sockets open for ever.
IDLE_CONNECTIONS = 256


def reconnecting() -> Retry:
    """How the gateway's Redis clients (redis-py's and `ScriptClient`) retry: after a connection
    that could not be made or dropped (e.g. Redis restarted), 3 times, after a random wait of up
    to 20, 40 and 80 ms. Never after a timeout: a hung Redis answers no retry either, and the
    request must fail fast with 503 BackendUnavailable rather than hang."""
    return Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.5), retries=3,
                 supported_errors=(RedisConnectionError,))


class Script(Protocol):
    """A Lua script: redis-py's ``AsyncScript`` (``Redis.register_script``) is one."""

    sha: str
    script: str


async def _dropped(_error: Exception) -> None:
    """Nothing to clean up before a retry: `ScriptClient._roundtrip` dropped the connection."""


def _encode(args: list[Any]) -> bytes:
    """A command in RESP: hiredis's (C) encoder, which takes str, bytes, int and float as this
    module always did (floats by ``repr``, str as UTF-8), else `_encode_any`."""
    try:
        return hiredis.pack_command(tuple(args))  # type: ignore[no-any-return]
    except TypeError:
        return _encode_any(args)


def _encode_any(args: list[Any]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int | float):
            arg = repr(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


class _Connection(asyncio.Protocol):
    def __init__(self, timeout: float) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader(replyError=ResponseError, encoding="utf-8")
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        # Commands sent, oldest first: (future of the reply, deadline in loop time)
        self.pending: deque[tuple[asyncio.Future[Any], float]] = deque()
        self.lost: BaseException | None = None
        self._watch: asyncio.TimerHandle | None = None  # armed at most once, see _check

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            if not self.pending:  # a reply nobody asked for: the stream is out of step
                self.abort(RedisConnectionError("Redis sent an unexpected reply"))
                return
            future, _ = self.pending.popleft()
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
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        while self.pending:
            future, _ = self.pending.popleft()
            if not future.done():
                future.set_exception(exc)

    def send(self, data: bytes) -> asyncio.Future[Any]:
        """Write a command; the future of its reply, which fails with
        `redis.exceptions.TimeoutError` when none comes within ``timeout``."""
        assert self.transport is not None
        loop = self.loop
        future = loop.create_future()
        deadline = loop.time() + self.timeout
        self.pending.append((future, deadline))
        self.transport.write(data)
        if self._watch is None:
            self._watch = loop.call_at(deadline, self._check)
        return future

    def _check(self) -> None:
        """The timer: drop the connection if its oldest command is past its deadline, else look
        again at that command's deadline (replies come in order: the oldest is always first)."""
        self._watch = None
        if not self.pending or self.lost is not None:
            return
        deadline = self.pending[0][1]
        if self.loop.time() + TIMER_SLACK >= deadline:
            self.abort(RedisTimeoutError("Timeout reading from Redis"))
        else:
            self._watch = self.loop.call_at(deadline, self._check)


class ScriptClient:
    def __init__(self, connect: dict[str, Any], timeout: float, connect_timeout: float) -> None:
        self._connect = connect
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._closed = False
        self._retry = reconnecting()

    @classmethod
    def for_url(cls, url: str, timeout: float, connect_timeout: float) -> ScriptClient | None:
        if is_cluster(url):  # redis-py's cluster client sends each script to its keys' node
            return None
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
        reply = await self._retry.call_with_retry(lambda: self._roundtrip(data), _dropped)
        if isinstance(reply, ResponseError):
            if str(reply).startswith("NOSCRIPT"):
                raise NoScriptError(str(reply))
            raise reply
        return reply

    async def _roundtrip(self, data: bytes) -> Any:
        connection = await self._connected()
        try:
            reply = await connection.send(data)  # past the deadline, the connection drops (_check)
        except BaseException:
            if connection.lost is None:  # cancelled: its reply would go to the next command
                connection.abort(RedisConnectionError("command abandoned"))
            raise
        if self._closed or len(self._idle) >= IDLE_CONNECTIONS:
            connection.abort(RedisConnectionError("client closed"))
        else:
            self._idle.append(connection)
        return reply

    async def _connected(self) -> _Connection:
        """An idle connection of the pool, else a new one."""
        while self._idle:
            connection = self._idle.pop()  # the most recently used: the least likely to be stale
            if connection.lost is None:
                return connection
        return await self._open()

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        options = self._connect

        def protocol() -> _Connection:
            return _Connection(self.timeout)

        try:
            async with asyncio.timeout(self.connect_timeout):
                if "path" in options:
                    _, connection = await loop.create_unix_connection(protocol, options["path"])
                else:
                    _, connection = await loop.create_connection(
                        protocol, options.get("host", "localhost"), options.get("port", 6379))
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
                reply = await connection.send(_encode(command))
            except RedisTimeoutError:
                connection.abort(RedisConnectionError("Redis did not answer the connection set-up"))
                raise  # a hung Redis, as for any command: waited out once, never retried
            except RedisConnectionError as exc:
                connection.abort(RedisConnectionError("Redis did not answer the connection set-up"))
                raise RedisConnectionError(f"Redis did not answer {command[0]}: {exc!r}") from exc
            if isinstance(reply, ResponseError):
                connection.abort(RedisConnectionError(str(reply)))
                raise reply
        return connection

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().abort(RedisConnectionError("client closed"))
