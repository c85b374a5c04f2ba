"""A private redis-server for `envscaler serve` when ENVSCALER_REDIS_URL is unset (and for tests).

It listens on loopback only, on a free port, with append-only persistence in its own directory,
and dies with the process that started it however that process ends (``PR_SET_PDEATHSIG``), so
``start`` must be called from a thread that lives as long as the process (the main thread).

One Redis per directory: ``start`` takes an exclusive ``flock`` on ``redis.lock`` in it, and a
second one on the same directory fails with a clear error instead of sharing (or corrupting) the
append-only file; gateways that should share sessions share a Redis of their own through
``ENVSCALER_REDIS_URL``. The lock's descriptor is inherited by redis-server, so the lock is held
until both the starter and its Redis are gone.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

from sandbox.runtime.contain import die_with_parent

STARTUP_TIMEOUT = 10.0
LOCK_NAME = "redis.lock"


class EmbeddedRedisError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _lock_directory(directory: Path) -> int:
    """A descriptor holding the directory's exclusive lock, with this process's pid in the file
    for the error message of the next one that tries."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise EmbeddedRedisError(
            f"{directory} is in use by the Redis of another gateway (pid {holder}); stop it, or "
            "give this one its own ENVSCALER_STATE_DIR or an ENVSCALER_REDIS_URL") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


class EmbeddedRedis:
    def __init__(self, directory: Path, port: int | None = None, persistent: bool = True) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.persistent = persistent
        self.process: subprocess.Popen[bytes] | None = None
        self._lock: int | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> EmbeddedRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise EmbeddedRedisError("redis-server is not installed; run scripts/bootstrap "
                                     "or set ENVSCALER_REDIS_URL to a Redis you run")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_directory(self.directory)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--save", "", "--appendonly", "yes" if self.persistent else "no",
                "--logfile", str(self.directory / "redis.log")]
        try:
            self.process = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(self._lock,),
                preexec_fn=functools.partial(die_with_parent, os.getpid()))  # noqa: PLW1509
            self._wait_until_ready()
        except BaseException:  # never leave a half-started Redis or the directory locked
            self.stop()
            raise
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
        raise EmbeddedRedisError(f"redis-server did not answer within {STARTUP_TIMEOUT:g} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
