"""A private redis-server for `envscaler serve` when ENVSCALER_REDIS_URL is unset (and for tests).

It listens on loopback only, on a free port, with append-only persistence in its own directory,
and dies with the process that started it however that process ends (``PR_SET_PDEATHSIG``), so
``start`` must be called from a thread that lives as long as the process (the main thread).

Every local user reaches loopback, so it requires a password: random, made once per directory
and kept there in ``redis.password`` (mode 0600, refused if anyone else may read it), so a
gateway restarted on the same directory finds its Redis's password again. The password reaches
redis-server on its standard input, never its command line (which every local user can read), and
the gateway through the URL (``url``). With ``maxmemory`` it refuses writes when full
(``noeviction``) instead of silently evicting sessions.

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
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

from envscaler.sandbox.runtime.contain import die_with_parent
from envscaler.sandbox.secretfile import private_secret

STARTUP_TIMEOUT = 10.0
LOCK_NAME = "redis.lock"
PASSWORD_NAME = "redis.password"
MAX_PASSWORD_BYTES = 4096  # a password read back: ours are 65 bytes


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


def _password(directory: Path) -> str:
    """The directory's Redis password: made on first use, then read back. A file that someone
    else owns or may read is refused: its password would not be a secret."""
    path = directory / PASSWORD_NAME
    try:
        secret = private_secret(path, lambda: f"{secrets.token_hex(32)}\n".encode(),
                                MAX_PASSWORD_BYTES)
    except PermissionError:
        raise EmbeddedRedisError(
            f"{path} must belong to this user and be readable by it alone (mode 0600); "
            "remove it and a new password is made") from None
    password = secret.decode(errors="replace").strip()
    if not password:
        raise EmbeddedRedisError(f"{path} is empty; remove it and a new password is made")
    return password


class EmbeddedRedis:
    def __init__(self, directory: Path, port: int | None = None, persistent: bool = True,
                 maxmemory: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.persistent = persistent
        self.maxmemory = maxmemory  # bytes; None: no limit
        self.password = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._lock: int | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def address(self) -> str:
        """Where it listens, without the password (for messages and logs)."""
        return f"127.0.0.1:{self.port}"

    def _config(self) -> bytes:
        """The settings that stay off the command line (redis-server reads them from stdin)."""
        lines = [f"requirepass {self.password}", "maxmemory-policy noeviction"]
        if self.maxmemory is not None:
            lines.append(f"maxmemory {self.maxmemory}")
        return "".join(line + "\n" for line in lines).encode()

    def start(self) -> EmbeddedRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise EmbeddedRedisError("redis-server is not installed; run scripts/bootstrap "
                                     "or set ENVSCALER_REDIS_URL to a Redis you run")
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = _lock_directory(self.directory)
        args = [binary, "-", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.directory), "--save", "",
                "--appendonly", "yes" if self.persistent else "no",
                "--logfile", str(self.directory / "redis.log")]
        try:
            self.password = _password(self.directory)
            self.process = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=(self._lock,),
                preexec_fn=functools.partial(die_with_parent, os.getpid()))  # noqa: PLW1509
            assert self.process.stdin is not None
            with self.process.stdin as config:
                config.write(self._config())
            self._wait_until_ready()
        except BaseException:  # never leave a half-started Redis or the directory locked
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        client = redis.Redis(port=self.port, password=self.password, socket_connect_timeout=0.2)
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
