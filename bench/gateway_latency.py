"""Latency of the gateway over HTTP: tool calls at concurrency 1 and 32, session creation from the
warm pool. A real gateway (uvicorn, one worker) on the Docker backend with an embedded Redis.

    .venv/bin/python -m bench.gateway_latency [--calls 400] [--sessions 30]
        [--out bench/results/gateway_latency.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import docker
import httpx

from sandbox.image import ensure_image
from server.embedded_redis import EmbeddedRedis, free_port
from server.settings import Settings

ENV, SCENARIO, TOOL, ARGUMENTS = "library_loans", "library_loans-001", "get_member", {"member_id": "M-1001"}
READY_TIMEOUT = 120.0
CONCURRENCY = 32  # one session per concurrent caller: calls on one session are serialized


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 2)}


async def timed(action: Callable[[], Awaitable[httpx.Response]], samples: list[float]) -> httpx.Response:
    started = time.perf_counter()
    response = await action()
    samples.append(time.perf_counter() - started)
    response.raise_for_status()
    return response


async def open_session(client: httpx.AsyncClient, samples: list[float]) -> str:
    created = await timed(lambda: client.post("/v1/sessions", json={"env": ENV, "scenario": SCENARIO}), samples)
    return created.json()["session_id"]


async def call_loop(client: httpx.AsyncClient, session_id: str, calls: int, samples: list[float]) -> None:
    body = {"name": TOOL, "arguments": ARGUMENTS}
    for _ in range(calls):
        await timed(lambda: client.post(f"/v1/sessions/{session_id}/calls", json=body), samples)


async def measure(url: str, calls: int, sessions: int) -> dict[str, object]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
        await wait_for_warm_pool(client, sessions)
        creation: list[float] = []
        ids = [await open_session(client, creation) for _ in range(sessions)]
        await wait_for_warm_pool(client, sessions)  # refilling starts containers: not a call's cost
        single: list[float] = []
        await call_loop(client, ids[0], calls, single)
        concurrent: list[float] = []
        started = time.perf_counter()
        await asyncio.gather(*(call_loop(client, ids[i], calls // 8, concurrent) for i in range(CONCURRENCY)))
        elapsed = time.perf_counter() - started
        for session_id in ids:
            await client.delete(f"/v1/sessions/{session_id}")
    return {"tool": TOOL, "session_creation_warm": summary(creation), "call_concurrency_1": summary(single),
            f"call_concurrency_{CONCURRENCY}": {**summary(concurrent),
                                    "calls_per_second": round(len(concurrent) / elapsed, 1)}}


async def wait_for_warm_pool(client: httpx.AsyncClient, size: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            ready = (await client.get("/readyz")).json()
            if ready.get("ready") and ready["pool"]["ready"] >= size:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.2)
    raise SystemExit("the gateway never became ready with a full warm pool")


def run(calls: int, sessions: int) -> dict[str, object]:
    settings = Settings()
    image = ensure_image(docker.from_env(), settings.sandbox_base_image)
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch, EmbeddedRedis(Path(scratch) / "redis", persistent=False) as redis:
        env = {**os.environ, "ENVSCALER_REDIS_URL": redis.url, "ENVSCALER_SANDBOX_IMAGE": image,
               "ENVSCALER_POOL_SIZE": str(sessions), "ENVSCALER_SANDBOX_CREATE_RATE": "100",
               "ENVSCALER_SOCKET_ROOT": f"/tmp/esbench-{secrets.token_hex(3)}", "ENVSCALER_LOG_LEVEL": "WARNING"}
        gateway = subprocess.Popen([sys.executable, "-m", "uvicorn", "server.app:create_app", "--factory",
                                    "--port", str(port), "--log-level", "warning", "--no-access-log"],
                                   env=env)
        try:
            return asyncio.run(measure(f"http://127.0.0.1:{port}", calls, sessions))
        finally:
            gateway.terminate()
            gateway.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--sessions", type=int, default=CONCURRENCY, help=f"at least {CONCURRENCY}")
    parser.add_argument("--out", type=Path, default=Path("bench/results/gateway_latency.json"))
    args = parser.parse_args()
    result = run(args.calls, max(args.sessions, CONCURRENCY))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
