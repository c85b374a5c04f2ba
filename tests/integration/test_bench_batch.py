"""The benchmark's batch phase (`envscaler.bench.batch`) and the transport measurement
(`envscaler.bench.client_transport`) with a few lanes against a real gateway (`envscaler serve`, Docker
backend, its own Redis): every figure of the report is produced, opens the gateway refuses are
counted rather than fatal, and every session the batch opened is closed. Speed is the
benchmark's to measure, never asserted here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from envscaler.bench import batch, client_transport, report
from envscaler.bench.gateway import Gateway, GatewayOptions
from envscaler.bench.http import HttpConnection
from envscaler.bench.workload import load_envs
from envscaler.server.settings import Settings

pytestmark = [pytest.mark.docker, pytest.mark.redis]


def live_sessions(gateway: Gateway) -> int:
    with HttpConnection("127.0.0.1", gateway.port) as conn:
        status, body = conn.request("GET", "/metrics")
    assert status == 200
    found = re.search(rb"^envscaler_sessions_live (\S+)$", body, re.MULTILINE)
    assert found is not None
    return int(float(found.group(1)))


def started(options: GatewayOptions, sandbox_image: str, scratch: Path) -> Iterator[Gateway]:
    gateway = Gateway(options, sandbox_image, scratch)
    try:
        gateway.start()
        gateway.wait_ready()
        yield gateway
    finally:
        gateway.stop()


@pytest.fixture
def one_worker(sandbox_image: str, tmp_path: Path) -> Iterator[Gateway]:
    yield from started(GatewayOptions(workers=1, pool_size=2), sandbox_image, tmp_path)


@pytest.fixture
def small_gateway(sandbox_image: str, tmp_path: Path) -> Iterator[Gateway]:
    """One worker that holds at most 3 sandboxes: a batch of 5 sees 2 opens refused, or more."""
    yield from started(GatewayOptions(workers=1, pool_size=1, max_sandboxes=3), sandbox_image,
                       tmp_path)


@pytest.mark.timeout(300)
def test_a_batch_reports_every_figure_and_closes_every_session(one_worker: Gateway) -> None:
    envs = load_envs(Settings().catalogue, ())
    figures = batch.measure(one_worker.url, envs, lanes=3, window=0.0)

    assert figures["concurrency"] == 3
    assert figures["open_all"]["opened"] == 3 and figures["open_all"]["failed"] == 0
    assert figures["open_all"]["seconds"] > 0
    memory = figures["memory"]
    assert memory["available_before_mib"] > 0 and memory["available_after_mib"] > 0
    assert isinstance(memory["per_live_session_mib"], float)
    # a window of 0 s: each lane runs one episode, on the lane's scenario, solved
    assert figures["episodes"] == 3 and figures["rewards"] == {"1.0": 3, "below_1": 0}
    assert figures["errors"] == {} and figures["tool_errors"] == {}
    assert figures["reset"]["n"] == figures["validate"]["n"] == 3
    assert figures["requests"] == 3 * 2 + figures["call"]["n"]
    assert figures["cpu_seconds"] > 0 and figures["cpu_ms_per_request"] > 0
    assert figures["close_all"] == {"seconds": figures["close_all"]["seconds"], "closed": 3,
                                    "failed": 0}
    assert live_sessions(one_worker) == 0

    figures["lease_expiries"] = 0
    section = "\n".join(report._batch(figures))
    assert "## Batch: 3 sessions from one client process" in section
    assert re.search(r"^\| 3 \| 3 / 0 \| [0-9.]+ s \| -?[0-9.]+ MiB \| 3 \(", section, re.MULTILINE)
    # a batch smaller than the floors' is shown, not judged
    rows = report._batch_floors(figures)
    assert [row["met"] for row in rows] == [None, None, None]


@pytest.mark.timeout(300)
def test_opens_the_gateway_refuses_are_reported_and_the_rest_run_and_close(
        small_gateway: Gateway) -> None:
    envs = load_envs(Settings().catalogue, ())
    figures = batch.measure(small_gateway.url, envs, lanes=5, window=0.0)

    opening = figures["open_all"]
    opened = opening["opened"]  # 3 at most (the warm pool's sandbox, or one still closing, counts)
    assert 1 <= opened <= 3 and opening["failed"] == 5 - opened
    assert sum(opening["failures"].values()) == 5 - opened and opening["failure_samples"]
    assert figures["episodes"] == opened and figures["rewards"]["1.0"] == opened
    assert figures["close_all"]["closed"] == opened and figures["close_all"]["failed"] == 0
    assert live_sessions(small_gateway) == 0


@pytest.mark.timeout(300)
def test_the_transport_measurement_runs_each_candidate_on_the_same_sessions(
        one_worker: Gateway) -> None:
    envs = load_envs(Settings().catalogue, ())
    rows = client_transport.measure(one_worker.url, envs, [2], ["envscaler", "httpx-default"],
                                    window=0.0, say=lambda _line: None)

    assert [(row["transport"], row["sessions"]) for row in rows] == [
        ("envscaler", 2), ("httpx-default", 2)]
    for row in rows:
        assert row["errors"] == {} and row["requests"] > 0 and row["cpu_ms_per_request"] > 0
    assert live_sessions(one_worker) == 2  # opened once, attached to by both, left open
    assert "| envscaler | 2 |" in client_transport.table(rows)
