"""A private redis-server for `envscaler serve` when ENVSCALER_REDIS_URL is unset (and for tests).

It listens on loopback only, on a free port, with append-only persistence in its own directory,
and dies with the process that started it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

STARTUP_TIMEOUT = 10.0


class EmbeddedRedisError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedRedis:
    def __init__(self, directory: Path, port: int | None = None, persistent: bool = True) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.persistent = persistent
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> EmbeddedRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise EmbeddedRedisError("redis-server is not installed; run scripts/bootstrap "
                                     "or set ENVSCALER_REDIS_URL to a Redis you run")
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--save", "", "--appendonly", "yes" if self.persistent else "no",
                "--logfile", str(self.directory / "redis.log")]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise EmbeddedRedisError(f"redis-server exited: see {self.directory / 'redis.log'}")
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        self.stop()
        raise EmbeddedRedisError(f"redis-server did not answer within {STARTUP_TIMEOUT:g} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
