"""A gateway inside the calling process, for `envscaler check` when it is given no ``--url``.

The gateway (``envscaler.server.app.create_app``) runs under uvicorn in a background thread, on a free
loopback port, with a throw-away Redis of its own (`EmbeddedRedis`) and no API keys. The app's
lifespan runs in that thread around uvicorn, so a start-up failure (no Docker, no image) reaches
`start` as an exception rather than a log line; stopping ends the lifespan, which kills the
gateway's sandboxes. Call `start` from the main thread: the Redis dies with the thread that starts
it.
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import threading
from pathlib import Path

import uvicorn

from envscaler.server.app import create_app
from envscaler.server.embedded_redis import EmbeddedRedis
from envscaler.server.http import gateway_options
from envscaler.server.settings import Settings
from envscaler.server.workers import listening_socket

STARTED_POLL = 0.02  # seconds between looks whether uvicorn has started


class EmbeddedGateway:
    """`start`, then requests to ``url``, then `stop` (always, even when `start` failed)."""

    def __init__(self, catalogue: Path) -> None:
        self.catalogue = catalogue.resolve()
        self.url = ""
        self._tmp = tempfile.TemporaryDirectory(prefix="envscaler-check-")
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._redis: EmbeddedRedis | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._redis = EmbeddedRedis(Path(self._tmp.name), persistent=False).start()
        # bound here, so the port cannot be taken meanwhile
        sock = listening_socket("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        settings = Settings(catalogue=self.catalogue, redis_url=self._redis.url, api_keys=[],
                            log_level="WARNING")
        self._thread = threading.Thread(target=self._run, args=(settings, sock), daemon=True,
                                        name="envscaler-check-gateway")
        self._thread.start()
        self._started.wait()
        if isinstance(self._error, Exception):
            raise self._error
        if self._error is not None:  # uvicorn exits (SystemExit) when it cannot serve
            raise RuntimeError(f"the server exited: {self._error!r}") from self._error

    def _run(self, settings: Settings, sock: socket.socket) -> None:
        try:
            asyncio.run(self._serve(settings, sock))
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that called start
            self._error = exc
        finally:
            sock.close()
            self._started.set()

    async def _serve(self, settings: Settings, sock: socket.socket) -> None:
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            self._server = uvicorn.Server(uvicorn.Config(app, lifespan="off",
                                                         **gateway_options(settings)))
            serving = asyncio.create_task(self._server.serve(sockets=[sock]))
            while not self._server.started and not serving.done():
                await asyncio.sleep(STARTED_POLL)
            if not serving.done():  # else it failed: awaiting it raises, and _run reports that
                self._started.set()
            await serving

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
        if self._redis is not None:
            self._redis.stop()
        self._tmp.cleanup()
