"""A real gateway for a benchmark: `envscaler serve` on the Docker backend (with ``--workers N``
only when asked: otherwise the command's default worker count applies, as a user gets it), with its
own Redis and its own socket root, so that every container it makes carries one label of this run
(``envscaler.socket-root=/tmp/esb-<pid>-...``) and is removed afterwards, whatever happened.

Every socket root of a run (`run_socket_root`: its gateways', its sandbox hosts') is named after
the run's process, so that `run_containers` finds every container the run made, whichever part
of it made them, even one that was killed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import docker
import redis
from docker.errors import APIError, NotFound

from envscaler.bench.http import HttpConnection
from envscaler.bench.procstat import descendants
from envscaler.server.embedded_redis import EmbeddedRedis, free_port
from envscaler.server.workers import default_count

READY_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0
SOCKET_ROOT_LABEL = "envscaler.socket-root"
RUN_PREFIX = f"/tmp/esb-{os.getpid()}-"  # short: socket paths <= 107 bytes
LEASE_EXPIRED = "session lock lease ran out before release"  # the gateway's warning, one a line


@dataclass
class GatewayOptions:
    workers: int | None = None   # None: `envscaler serve`'s default
    pool_size: int = 8            # per worker
    max_sandboxes: int = 1024     # per worker
    log_level: str = "INFO"        # the gateway's default: what its users run
    env: dict[str, str] = field(default_factory=dict)


class Gateway:
    """Start with `start()` (or ``with``); `stop()` ends the gateway and removes its containers."""

    def __init__(self, options: GatewayOptions, image: str, scratch: Path) -> None:
        self.options = options
        self.image = image
        self.scratch = scratch
        self.port = free_port()
        self.socket_root = run_socket_root()
        self.redis = EmbeddedRedis(scratch / f"redis-{self.port}", persistent=True)
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = scratch / f"gateway-{self.port}.log"
        self.docker = docker.from_env(timeout=120)

    @property
    def workers(self) -> int:
        """Its worker processes: as asked, else `envscaler serve`'s default on this machine."""
        return self.options.workers or default_count()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Gateway:
        self.redis.start()
        self.socket_root.mkdir(mode=0o700, exist_ok=True)
        o = self.options
        env = {**os.environ, "ENVSCALER_REDIS_URL": self.redis.url,
               "ENVSCALER_SANDBOX_IMAGE": self.image, "ENVSCALER_SANDBOX_BACKEND": "docker",
               "ENVSCALER_POOL_SIZE": str(o.pool_size),
               "ENVSCALER_MAX_SANDBOXES": str(o.max_sandboxes),
               "ENVSCALER_SOCKET_ROOT": str(self.socket_root), "ENVSCALER_LOG_LEVEL": o.log_level,
               "ENVSCALER_STATE_DIR": str(self.scratch / "state"), **o.env}
        env.pop("ENVSCALER_API_KEYS", None)
        command = [sys.executable, "-m", "envscaler.cli", "serve", "--port", str(self.port),
                   "--workers", str(self.workers)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=log,
                                            start_new_session=True)
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ readiness

    def wait_ready(self, pool_full: bool = True, timeout: float = READY_TIMEOUT) -> dict[str, Any]:
        """Until every worker answers /readyz (with a full warm pool when ``pool_full``);
        {instance: pool level}. Workers are told apart by the instance id in the answer, on a
        fresh connection each time (the supervisor deals connections to its workers in turn)."""
        deadline = time.monotonic() + timeout
        seen: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with HttpConnection("127.0.0.1", self.port, timeout=5) as conn:
                    status, body = conn.request("GET", "/readyz")
                ready = json.loads(body)
                if status == 200 and ready.get("ready"):
                    seen[ready["instance"]] = ready["pool"]
            except (OSError, ValueError):
                pass
            full = [i for i, p in seen.items() if not pool_full or p["ready"] >= p["target"]]
            if len(seen) >= self.workers and len(full) >= self.workers:
                return seen
            if len(seen) >= self.workers:
                seen.clear()  # look again for fresh pool levels
            time.sleep(0.1)
        raise RuntimeError(f"the gateway was not ready within {timeout:g} s; see {self.log_path}")

    def _check_alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""
            raise RuntimeError(f"the gateway exited:\n{tail}")

    def log_count(self, text: str) -> int:
        """Lines of the gateway's log (every worker's) holding ``text``."""
        if not self.log_path.exists():
            return 0
        return sum(text in line for line in self.log_path.read_text(errors="replace").splitlines())

    # ------------------------------------------------------------------ what it uses

    def pids(self) -> list[int]:
        """The serving processes: the supervisor and its workers."""
        assert self.process is not None
        return descendants(self.process.pid)

    def redis_pid(self) -> int:
        assert self.redis.process is not None
        return self.redis.process.pid

    def redis_memory(self) -> int:
        client = redis.Redis.from_url(self.redis.url)
        try:
            return int(client.info("memory")["used_memory"])
        finally:
            client.close()

    def containers(self) -> list[str]:
        """Ids of every container this gateway made (ready, in use, or stopped)."""
        found = self.docker.api.containers(
            all=True, quiet=True, filters={"label": f"{SOCKET_ROOT_LABEL}={self.socket_root}"})
        return [c["Id"] for c in found]

    # ------------------------------------------------------------------ stop

    def stop(self) -> int:
        """Stop the gateway and Redis, remove every container of this run (whatever fails on the
        way, e.g. an engine that is restarting); how many containers were left."""
        try:
            if self.process is not None and self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGTERM)  # its own session: all its workers
                try:
                    self.process.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()
        finally:
            try:
                left = remove_containers(self.docker, self.containers())
            finally:
                self.redis.stop()
                shutil.rmtree(self.socket_root, ignore_errors=True)
        return left


def run_socket_root() -> Path:
    """A new socket root of this run (not created yet)."""
    return Path(RUN_PREFIX + secrets.token_hex(3))


def run_containers(client: docker.DockerClient, label: str) -> list[str]:
    """Ids of every container of this run: under one of its socket roots, or carrying ``label``
    (``name=value``: the throwaway containers of the baselines)."""
    labelled = client.api.containers(all=True, filters={"label": label})
    rooted = client.api.containers(all=True, filters={"label": SOCKET_ROOT_LABEL})
    return sorted({c["Id"] for c in labelled} | {
        c["Id"] for c in rooted
        if (c.get("Labels") or {}).get(SOCKET_ROOT_LABEL, "").startswith(RUN_PREFIX)})


def remove_containers(client: docker.DockerClient, ids: list[str], parallel: int = 8) -> int:
    def remove(cid: str) -> None:
        try:
            client.api.remove_container(cid, force=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 409:
                raise

    with ThreadPoolExecutor(parallel) as executor:
        list(executor.map(remove, ids))
    return len(ids)
