"""Which HTTP transport the async client should use, by measurement: the client's own CPU per
request (``time.process_time`` of the client process, robust on a loaded machine) and episodes/s,
for each candidate at each number of concurrent sessions, against a real `envscaler serve`.

    python -m envscaler.bench.client_transport --levels 64 512 --window 30 --out transport.json

Each candidate drives the trainer's pattern (`envscaler.bench.rollouts`, ``reset``: a session per lane, reset
per episode, the reference solution, validate) in its own process, through `AsyncEnvClient` with
the candidate as its ``httpx`` transport (request building, answers and retries stay the same), on
the same sessions: opened once per level beforehand (how fast the gateway opens them is the batch
phase's figure, not the transport's), attached to by each candidate's process.

- ``httpx-default``: httpx's pool (httpcore) with httpx's default limits (100 connections, 20 kept
  alive): the client before this measurement;
- ``httpx-sized``: the same pool with a connection per lane, all kept alive;
- ``httpx-sharded``: a small httpx pool per 16 lanes, a session sticking to one (by its id);
- ``aiohttp``: aiohttp's connector, a connection per lane (only when aiohttp is installed);
- ``envscaler``: the client's own pool (`envscaler_client._transport`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import asdict
from itertools import count
from pathlib import Path
from typing import Any

import docker
import httpx

from envscaler.bench import rollouts
from envscaler.bench.gateway import Gateway, GatewayOptions
from envscaler.bench.workload import lanes, load_envs
from envscaler_client import AsyncEnvClient, connection_limits
from envscaler_client._transport import PoolTransport
from envscaler.sandbox.image import resolve_image
from envscaler.server.settings import Settings

SHARD_LANES = 16
STALLED = 900.0  # seconds past the window after which a candidate's run counts as stalled


class ShardedTransport(httpx.AsyncBaseTransport):
    """Small httpx pools side by side: a session's requests go to one, chosen by its id; requests
    of no session (opening one) go round."""

    def __init__(self, lanes_: int) -> None:
        limits = connection_limits(SHARD_LANES)
        self.shards = [httpx.AsyncHTTPTransport(limits=limits)
                       for _ in range(math.ceil(lanes_ / SHARD_LANES))]
        self._turn = count()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.split("/")  # /v1/sessions/{id}/...
        key = zlib.crc32(parts[3].encode()) if len(parts) > 3 else next(self._turn)
        return await self.shards[key % len(self.shards)].handle_async_request(request)

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """aiohttp's client and connector (a connection per lane) under httpx's request building."""

    def __init__(self, lanes_: int) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self.lanes = lanes_
        self._session: Any = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._session is None:
            connector = self._aiohttp.TCPConnector(limit=self.lanes, keepalive_timeout=4.0)
            self._session = self._aiohttp.ClientSession(connector=connector,
                                                        auto_decompress=False)
        body = await request.aread()
        async with self._session.request(request.method, str(request.url), data=body or None,
                                         headers=dict(request.headers)) as answer:
            content = await answer.read()
            return httpx.Response(answer.status, headers=answer.raw_headers, content=content)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


CANDIDATES: dict[str, Callable[[int], httpx.AsyncBaseTransport]] = {
    "httpx-default": lambda _lanes: httpx.AsyncHTTPTransport(
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=20)),
    "httpx-sized": lambda lanes_: httpx.AsyncHTTPTransport(limits=connection_limits(lanes_)),
    "httpx-sharded": ShardedTransport,
    "aiohttp": AiohttpTransport,
    "envscaler": lambda lanes_: PoolTransport(connection_limits(lanes_)),
}


class _Measured(AsyncEnvClient):
    """`AsyncEnvClient` on a candidate transport."""

    def __init__(self, url: str, transport: httpx.AsyncBaseTransport) -> None:
        self._transport = transport
        super().__init__(url)

    def _open(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(**self.config.http_kwargs(), transport=self._transport)


def candidate_client(name: str, url: str, lanes_: int) -> AsyncEnvClient:
    return _Measured(url, CANDIDATES[name](lanes_))


def available(names: list[str]) -> list[str]:
    """The candidates that can run here (aiohttp is no dependency of the project)."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return [name for name in names if name != "aiohttp"]
    return names


async def open_sessions(url: str, work: list[list[dict[str, Any]]],
                        parallel: int = 32) -> list[list[str | None]]:
    """A session per lane on its last scenario, ``parallel`` opening at a time, each waited for
    as long as the gateway takes; ``[id, agent_token]`` each."""
    async with AsyncEnvClient(url, read_timeout=600.0,
                              limits=connection_limits(parallel)) as client:
        gate = asyncio.Semaphore(parallel)

        async def one(lane: list[dict[str, Any]]) -> list[str | None]:
            async with gate:
                session = await client.create_session(lane[-1]["env"], lane[-1]["scenario"])
                return [session.id, session.agent_token]

        return list(await asyncio.gather(*map(one, work)))


def measure(url: str, envs: dict[str, Any], levels: list[int], names: list[str],
            window: float, say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """One run per candidate and level, each in a client process of its own."""
    rows = []
    for level in levels:
        work = [[asdict(episode) for episode in lane] for lane in lanes(envs, level)]
        sessions = asyncio.run(open_sessions(url, work))
        say(f"{level} sessions open")
        for name in names:
            load_before = os.getloadavg()[0]
            try:
                result = rollouts.spawn({"url": url, "pattern": "reset", "window": window,
                                         "lanes": work, "transport": name,
                                         "sessions": sessions}, timeout=window + STALLED)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                say(f"{name:14} {level:4} sessions: no figures, {str(exc)[-300:]}")
                rows.append({"transport": name, "sessions": level, "failed": str(exc)[-300:]})
                continue
            row = {"transport": name, "sessions": level,
                   "cpu_ms_per_request": result["cpu_ms_per_request"],
                   "cpu_share": result["cpu_share"],
                   "episodes_per_second": result["episodes_per_second"],
                   "requests": result["requests"], "errors": result["errors"],
                   "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)]}
            rows.append(row)
            say(f"{name:14} {level:4} sessions: "
                f"{row['cpu_ms_per_request']} ms CPU/request, {row['cpu_share']} cores, "
                f"{row['episodes_per_second']} episodes/s, errors {row['errors'] or 0}, "
                f"load {row['load_average']}")
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| transport | sessions | client CPU ms/request | client cores | episodes/s | "
             "load average |", "|---|---:|---:|---:|---:|---|"]
    lines += [f"| {r['transport']} | {r['sessions']} | no figures: {r['failed'][:80]} | | | |"
              if "failed" in r else
              f"| {r['transport']} | {r['sessions']} | {r['cpu_ms_per_request']} | "
              f"{r['cpu_share']} | {r['episodes_per_second']} | "
              f"{r['load_average'][0]}-{r['load_average'][1]} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES),
                        choices=list(CANDIDATES))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    settings = Settings()
    image = resolve_image(settings, docker.from_env(timeout=120))
    envs = load_envs(settings.catalogue, ())
    scratch = Path(tempfile.mkdtemp(prefix="envscaler-transport-"))
    gateway = Gateway(GatewayOptions(pool_size=16), image, scratch)
    try:
        gateway.start()
        gateway.wait_ready()
        rows = measure(gateway.url, envs, args.levels, available(args.candidates), args.window,
                       say=lambda text: print(text, flush=True))
    finally:
        gateway.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
