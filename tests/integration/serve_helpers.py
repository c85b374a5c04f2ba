"""`envscaler serve` as an operator runs it, in a subprocess, for the tests of its workers, its
metrics and its lifetime; and HTTP on a chosen worker: a connection stays with the worker that
accepted it, which ``/healthz`` names (its instance id)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.deadlines import scaled
from tests.integration.gateway_fixtures import REPO_ROOT

T = TypeVar("T")
ATTEMPTS_PER_WORKER = 64  # new connections tried per worker before giving up on reaching one


def serve_env(socket_root: Path, **settings: str) -> dict[str, str]:
    """This environment with the process backend, no warm pool and no API keys; ``settings``
    by lower-case name without the ``ENVSCALER_`` prefix (``pool_size="1"``)."""
    env = {**os.environ, "ENVSCALER_SANDBOX_BACKEND": "process", "ENVSCALER_POOL_SIZE": "0",
           "ENVSCALER_SOCKET_ROOT": str(socket_root), "ENVSCALER_LOG_LEVEL": "INFO"}
    env.pop("ENVSCALER_API_KEYS", None)
    env.update({f"ENVSCALER_{name.upper()}": value for name, value in settings.items()})
    return env


def serve(port: int, env: dict[str, str], log: Path,
          workers: int | None = None) -> subprocess.Popen[bytes]:
    """``workers=None``: the default (``ENVSCALER_WORKERS``, else one per CPU)."""
    count = [] if workers is None else ["--workers", str(workers)]
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "envscaler.cli", "serve", "--port", str(port), *count],
            cwd=REPO_ROOT, env=env, stdout=out, stderr=out)


def wait_for(condition: Callable[[], T], timeout: float, what: str) -> T:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        try:
            if value := condition():
                return value
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def request(conn: http.client.HTTPConnection, method: str, path: str,
            body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """Status and body (JSON, or text for ``/metrics``) on a kept-alive connection."""
    payload = None if body is None else json.dumps(body)
    conn.request(method, path, payload, {"content-type": "application/json"})
    response = conn.getresponse()
    data = response.read().decode()
    is_json = response.getheader("content-type", "").startswith("application/json")
    return response.status, json.loads(data) if is_json else data


def instance_of(conn: http.client.HTTPConnection) -> str:
    status, body = request(conn, "GET", "/healthz")
    assert status == 200, body
    return str(body["instance"])


def on_each_worker(port: int, workers: int,
                   action: Callable[[http.client.HTTPConnection], T]) -> dict[str, T]:
    """``action`` run once on a connection to each of ``workers`` workers, by instance id."""
    done: dict[str, T] = {}
    for _ in range(ATTEMPTS_PER_WORKER * workers):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=scaled(30))
        try:
            instance = instance_of(conn)
            if instance not in done:
                done[instance] = action(conn)
        finally:
            conn.close()
        if len(done) == workers:
            return done
    raise TimeoutError(f"reached {len(done)} of {workers} workers")  # e.g. one is restarting


def workers_of(pid: int) -> list[int]:
    """The worker processes of the supervisor ``pid`` (not multiprocessing's resource tracker,
    nor its Redis)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children
            if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text()]


def ready(conn: http.client.HTTPConnection) -> bool:
    """This worker answers /readyz with a full warm pool."""
    status, body = request(conn, "GET", "/readyz")
    return status == 200 and body["pool"]["ready"] >= body["pool"]["target"]


def all_ready(port: int, workers: int) -> bool:
    return all(on_each_worker(port, workers, ready).values())


def metric(text: str, sample: str) -> float:
    """The value of one sample line of /metrics, e.g. ``envscaler_pool_live``."""
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name == sample:
            return float(value)
    raise AssertionError(f"{sample} not in /metrics:\n{text}")
