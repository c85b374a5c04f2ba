"""`envscaler serve --workers N` (`envscaler.server.workers`): a listening socket per worker, so connections
opened at once are spread over the workers; a worker that dies is replaced; SIGTERM stops all; a
port taken by another program is a clear error. Real processes, real Redis (process backend with
no warm pool: no sandbox is made)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from envscaler.server.embedded_redis import free_port
from tests.deadlines import scaled
from tests.integration.serve_helpers import serve, serve_env, wait_for, workers_of

WORKERS = 2
CONNECTIONS = 32
Served = tuple[int, subprocess.Popen[bytes]]


def _env(redis_url: str, socket_root: Path) -> dict[str, str]:
    return serve_env(socket_root, redis_url=redis_url.rsplit("/", 1)[0] + "/7")


def _healthz_on(sock: socket.socket) -> str:
    """The instance id of the worker that accepted this connection."""
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])["instance"]


def _instances_of(port: int, count: int) -> Counter[str]:
    """Open ``count`` connections at once, then ask each which worker holds it."""
    socks = [socket.create_connection(("127.0.0.1", port),
                                      timeout=scaled(10)) for _ in range(count)]
    try:
        return Counter(_healthz_on(sock) for sock in socks)
    finally:
        for sock in socks:
            sock.close()


@pytest.fixture
def gateway(redis_url: str, socket_root: Path, tmp_path: Path) -> Iterator[Served]:
    port = free_port()
    process = serve(port, _env(redis_url, socket_root), tmp_path / "gateway.log", WORKERS)
    try:
        wait_for(lambda: len(_instances_of(port, 8)) == WORKERS, 60, "both workers to answer")
        yield port, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(scaled(10))


def test_connections_opened_at_once_are_spread_over_the_workers(gateway: Served) -> None:
    port, _ = gateway
    spread = _instances_of(port, CONNECTIONS)
    assert len(spread) == WORKERS, spread
    # dealt in turn by the supervisor, not hashed: as even as the count allows
    assert max(spread.values()) - min(spread.values()) <= 1, spread


def test_a_worker_that_dies_is_replaced_and_sigterm_stops_all(gateway: Served) -> None:
    port, process = gateway
    before = set(_instances_of(port, 16))
    workers = workers_of(process.pid)
    assert len(workers) == WORKERS
    os.kill(workers[0], signal.SIGKILL)
    after = wait_for(lambda: (found := set(_instances_of(port, 16))) - before and
                     len(found) == WORKERS and found, 60, "a replacement worker")
    assert len(after & before) == 1  # the survivor, and a new instance in place of the dead one
    assert process.poll() is None
    workers = workers_of(process.pid)
    process.send_signal(signal.SIGTERM)
    assert process.wait(scaled(40)) == 0
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]


def test_a_port_taken_by_another_program_is_a_clear_error(redis_url: str, socket_root: Path,
                                                          tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = serve(port, _env(redis_url, socket_root), tmp_path / "gateway.log", WORKERS)
        assert process.wait(scaled(60)) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in (tmp_path / "gateway.log").read_text()
