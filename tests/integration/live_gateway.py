"""A live gateway for client tests: uvicorn in its own process on a free loopback port (a socket,
so dropped connections are real), the Docker backend with the suite's sandbox image, the suite's
Redis, and ``TEST_LABELS`` on every sandbox so the suite catches leftovers. Plus a TCP proxy that
can drop a connection after the gateway has answered, as a flaky network or load balancer would.

A test module takes the fixtures with ``from tests.integration.live_gateway import *``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import pytest

from envscaler.server.settings import Settings
from tests.conftest import TEST_LABELS
from tests.integration.gateway_fixtures import GatewayProcess, catalogue_root

__all__ = ["catalogue_root", "live_gateway"]  # the fixtures

API_KEY = "client-test-key"
# Other gateway tests empty DB 0 before each test (tests/integration/gateway_fixtures.redis_client);
# the long-lived gateways here keep their sessions in DB 1.
REDIS_DB = 1
# Short on purpose: a busy session answers 503 SessionBusy soon, a spinning tool times out soon.
CALL_TIMEOUT = 2.0
SESSION_LOCK_WAIT = 0.5


@dataclass
class LiveGateway:
    url: str
    api_key: str
    settings: Settings
    catalogue: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


def gateway_settings(redis_url: str, catalogue: Path, sandbox_image: str, socket_root: Path,
                     **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "redis_url": redis_url.rsplit("/", 1)[0] + f"/{REDIS_DB}", "catalogue": catalogue,
        "sandbox_backend": "docker", "sandbox_image": sandbox_image, "socket_root": socket_root,
        "pool_size": 2, "max_sandboxes": 32, "api_keys": [API_KEY], "log_level": "WARNING",
        "call_timeout": CALL_TIMEOUT, "session_lock_wait": SESSION_LOCK_WAIT, **overrides}
    return Settings(**values)


@contextmanager
def running_gateway(settings: Settings, log_path: Path) -> Iterator[LiveGateway]:
    """The gateway in its own uvicorn process for the block (SIGTERM kills its sandboxes)."""
    process = GatewayProcess(settings, TEST_LABELS, log_path).start(timeout=120)
    try:
        yield LiveGateway(process.url, API_KEY, settings, settings.catalogue)
    finally:
        process.stop()


@pytest.fixture(scope="module")
def live_gateway(redis_url: str, catalogue_root: Path, sandbox_image: str, socket_root: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    settings = gateway_settings(redis_url, catalogue_root, sandbox_image, socket_root)
    with running_gateway(settings, tmp_path_factory.mktemp("gateway") / "gateway.log") as gateway:
        yield gateway


METHODS = (b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"HEAD", b"OPTIONS")


@dataclass
class _Exchange:
    request: str = ""
    awaiting_head: bool = False


@dataclass
class FlakyProxy:
    """A loopback TCP proxy to ``upstream_port`` in its own thread and event loop (sync clients can
    use it too). It records every response's request line and status, and `drop` makes it close the
    client's connection, without a byte of the answer, for the next responses to matching requests:
    the gateway has done the work, the client never hears of it."""

    upstream_port: int
    responses: list[tuple[str, int]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    _drops: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def __enter__(self) -> Self:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="flaky-proxy",
                                        daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop).result()
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop(self, fragment: str, times: int = 1) -> None:
        """Drop the connection instead of relaying the next ``times`` answers to requests whose
        request line contains ``fragment`` (e.g. ``"/calls"``)."""
        with self._lock:
            self._drops[fragment] = self._drops.get(fragment, 0) + times

    def statuses(self, fragment: str) -> list[int]:
        with self._lock:
            return [status for request, status in self.responses if fragment in request]

    def _should_drop(self, request: str) -> bool:
        with self._lock:
            for fragment, left in self._drops.items():
                if left and fragment in request:
                    self._drops[fragment] = left - 1
                    self.dropped.append(request)
                    return True
        return False

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                "127.0.0.1", self.upstream_port)
            self._writers.add(upstream_writer)
            await asyncio.gather(self._requests(reader, upstream_writer, exchange := _Exchange()),
                                 self._answers(upstream_reader, writer, upstream_writer, exchange),
                                 return_exceptions=True)
        finally:
            writer.close()
            self._writers.discard(writer)
            self._tasks.discard(task)

    async def _requests(self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter,
                        exchange: _Exchange) -> None:
        try:
            while data := await reader.read(65536):
                if data.split(b" ", 1)[0] in METHODS:  # httpx sends one request at a time
                    exchange.request, exchange.awaiting_head = data.split(b"\r\n",
                                                                          1)[0].decode(), True
                upstream.write(data)
                await upstream.drain()
        finally:
            upstream.close()
            self._writers.discard(upstream)

    async def _answers(self, upstream: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       upstream_writer: asyncio.StreamWriter, exchange: _Exchange) -> None:
        while data := await upstream.read(65536):
            if exchange.awaiting_head:
                exchange.awaiting_head = False
                if self._should_drop(exchange.request):
                    writer.transport.abort()
                    upstream_writer.transport.abort()
                    return
                with self._lock:
                    self.responses.append((exchange.request, int(data.split(b" ", 2)[1])))
            writer.write(data)
            await writer.drain()
        writer.close()

    async def _shutdown(self) -> None:
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
