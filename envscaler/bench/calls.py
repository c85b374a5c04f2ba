"""Tool calls through the gateway under load: sessions opened in bulk, then a closed-loop load in
which each connection (one concurrent caller) calls only its own sessions, so calls on one session
never queue behind each other and concurrency is across sessions."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from envscaler.bench import loadgen
from envscaler.bench.http import HttpConnection
from envscaler.bench.procstat import CpuMeter
from envscaler.bench.workload import Probe

OPEN_PARALLEL = 16
OPEN_ATTEMPTS = 20


def open_sessions(port: int, probe: Probe, count: int, parallel: int = OPEN_PARALLEL) -> list[str]:
    """``count`` sessions of the probe's scenario, opened ``parallel`` at a time (unmeasured)."""
    def worker(share: int) -> list[str]:
        ids = []
        with HttpConnection("127.0.0.1", port, timeout=120) as conn:
            for _ in range(share):
                for attempt in range(OPEN_ATTEMPTS):
                    status, raw = conn.request("POST", "/v1/sessions",
                                               {"env": probe.env, "scenario": probe.scenario})
                    if status == 201:
                        ids.append(json.loads(raw)["session_id"])
                        break
                    if status not in (429, 503) or attempt == OPEN_ATTEMPTS - 1:
                        raise RuntimeError(f"creating a session answered {status}: {raw[:300]!r}")
                    time.sleep(0.5)  # capacity or creation rate: as Retry-After says, briefly
        return ids

    shares = [count // parallel + (1 if i < count % parallel else 0) for i in range(parallel)]
    with ThreadPoolExecutor(parallel) as executor:
        return [sid for ids in executor.map(worker, [s for s in shares if s]) for sid in ids]


def call_requests(probe: Probe, session_ids: list[str]) -> list[dict[str, Any]]:
    return [{"method": "POST", "path": f"/v1/sessions/{sid}/calls", "body": probe.body()}
            for sid in session_ids]


def load(port: int, connections: list[list[dict[str, Any]]], warmup: float, duration: float,
         meter: CpuMeter | None) -> dict[str, Any]:
    """One closed-loop run: connection i cycles through ``connections[i]``."""
    spec = {"port": port, "warmup": warmup, "duration": duration,
            "connections": [{"requests": requests} for requests in connections]}
    result = loadgen.spawn(spec, meter)
    bad = {code: n for code, n in result["status"].items() if code != "200"}
    result["failed"] = sum(bad.values()) + result["error_count"]
    return result


def spread(requests: list[dict[str, Any]], connections: int) -> list[list[dict[str, Any]]]:
    """Deal requests (one per session) to connections: each session belongs to one connection."""
    dealt: list[list[dict[str, Any]]] = [[] for _ in range(min(connections, len(requests)))]
    for index, request in enumerate(requests):
        dealt[index % len(dealt)].append(request)
    return dealt


def close_sessions(port: int, session_ids: list[str], parallel: int = OPEN_PARALLEL) -> None:
    """DELETE every session (each kills its sandbox), ``parallel`` at a time."""
    def worker(ids: list[str]) -> None:
        with HttpConnection("127.0.0.1", port, timeout=120) as conn:
            for session_id in ids:
                conn.timed("DELETE", f"/v1/sessions/{session_id}")

    shares = [session_ids[i::parallel] for i in range(parallel)]
    with ThreadPoolExecutor(parallel) as executor:
        list(executor.map(worker, [share for share in shares if share]))
