"""`/metrics` of `envscaler serve --workers 2` counts the work of every worker, whichever worker
answers the scrape (prometheus_client's multiprocess mode, ``envscaler.server.metrics``), and still does
after a worker died and was replaced: its counts stay, its pool drops out. Real processes, the
suite's Redis, the process backend."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envscaler.server.embedded_redis import free_port
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import COUNTER, catalogue_root  # noqa: F401 - a fixture
from tests.integration.serve_helpers import (all_ready, instance_of, metric, on_each_worker,
                                             request, serve, serve_env, wait_for, workers_of)

WORKERS = 2
POOL_SIZE = 1
SESSIONS_PER_WORKER = 3
CALLS_PER_SESSION = 2
CREATED = f'envscaler_sessions_created_total{{env="{COUNTER}"}}'
CALLS = f'envscaler_tool_call_seconds_count{{env="{COUNTER}",tool="increment"}}'
Served = tuple[int, subprocess.Popen[bytes]]


@pytest.fixture
def gateway(redis_url: str, socket_root: Path, catalogue_root: Path,  # noqa: F811
            tmp_path: Path) -> Iterator[Served]:
    env = serve_env(socket_root, redis_url=redis_url.rsplit("/", 1)[0] + "/8",
                    catalogue=str(catalogue_root), pool_size=str(POOL_SIZE))
    port = free_port()
    process = serve(port, env, tmp_path / "gateway.log", WORKERS)
    try:
        wait_for(lambda: all_ready(port, WORKERS), 60, "both workers with a full pool")
        yield port, process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(scaled(60))


def _episodes(conn: http.client.HTTPConnection) -> int:
    """Sessions with calls on this connection's worker; how many calls it made."""
    for _ in range(SESSIONS_PER_WORKER):
        status, body = request(conn, "POST", "/v1/sessions", {"env": COUNTER,
                                                               "scenario": "counter-1"})
        assert status == 201, body
        for _ in range(CALLS_PER_SESSION):
            status, answer = request(conn, "POST", f"/v1/sessions/{body['session_id']}/calls",
                                     {"name": "increment", "arguments": {"name": "a"}})
            assert status == 200, answer
    return SESSIONS_PER_WORKER * CALLS_PER_SESSION


def _scrape(conn: http.client.HTTPConnection) -> str:
    status, text = request(conn, "GET", "/metrics")
    assert status == 200
    return str(text)


def _assert_totals(port: int, sessions: int, calls: int) -> None:
    """Every worker's scrape shows the totals, and the warm pools of the live workers."""
    for worker, text in on_each_worker(port, WORKERS, _scrape).items():
        assert metric(text, CREATED) == sessions, worker
        assert metric(text, CALLS) == calls, worker
        assert metric(text, "envscaler_pool_target") == WORKERS * POOL_SIZE, worker


def test_metrics_count_the_work_of_every_worker(gateway: Served) -> None:
    port, process = gateway
    calls = on_each_worker(port, WORKERS, _episodes)
    assert len(calls) == WORKERS  # both workers did some of the work
    _assert_totals(port, WORKERS * SESSIONS_PER_WORKER, sum(calls.values()))

    before = set(calls)
    os.kill(workers_of(process.pid)[0], signal.SIGKILL)
    wait_for(lambda: set(on_each_worker(port, WORKERS, instance_of)) != before
             and all_ready(port, WORKERS), 60, "a replacement worker with a full pool")
    _assert_totals(port, WORKERS * SESSIONS_PER_WORKER, sum(calls.values()))
