"""Sandbox start-up and footprint on the Docker backend.

Measures, side by side in one run: the cold start of a sandbox (create until the runtime answers),
claiming a warm sandbox and loading an environment into it, and the memory of an idle loaded
sandbox (cgroup usage less page cache). Prints a table and writes JSON.

    .venv/bin/python -m envscaler.bench.sandbox_startup [--samples 20] [--out bench/results/sandbox_startup.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import time
from pathlib import Path

import docker

from envscaler.format.loader import load_catalogue
from envscaler.sandbox.backends.docker import DockerBackend
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.image import resolve_image
from envscaler.sandbox.pool import SandboxPool
from envscaler.server.settings import Settings


def _ms(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
            "min_ms": round(ordered[0] * 1000, 2)}


def _idle_memory_mib(client: docker.DockerClient, container_id: str) -> float:
    stats = client.api.stats(container_id, stream=False)["memory_stats"]
    cache = stats.get("stats", {}).get("inactive_file", stats.get("stats", {}).get("cache", 0))
    return (stats["usage"] - cache) / 2**20


async def run(samples: int) -> dict[str, object]:
    settings = Settings()
    client = docker.from_env()
    image = await asyncio.to_thread(resolve_image, settings, client)
    env = load_catalogue(settings.catalogue, strict=True).envs["library_loans"]
    scenario = env.scenarios[0]
    config = SandboxConfig(sandbox_image=image,
                           socket_root=Path(f"/tmp/esb-{secrets.token_hex(3)}"),
                           pool_size=samples, sandbox_create_concurrency=16,
                           labels={"envscaler.bench": "1"})
    pool = SandboxPool(DockerBackend(config, f"bench-{secrets.token_hex(3)}"), config)
    await pool.start()
    try:
        cold = []
        for _ in range(samples):
            started = time.perf_counter()
            handle = await pool.backend.create({})
            cold.append(time.perf_counter() - started)
            await pool.backend.destroy(handle)
        while pool.stats().ready < samples:
            await asyncio.sleep(0.05)
        warm, loaded = [], []
        for _ in range(samples):
            started = time.perf_counter()
            sandbox = await pool.claim("bench")
            await sandbox.load(source=env.source, class_name=env.manifest.class_name,
                               tools=env.tool_names, init_config=env.initial_config(scenario),
                               seed=0,
                               max_result_bytes=1 << 20, timeout=10)
            warm.append(time.perf_counter() - started)
            loaded.append(sandbox)
        await asyncio.sleep(2)
        memory = [await asyncio.to_thread(_idle_memory_mib, client, s.id) for s in loaded]
        for sandbox in loaded:
            await sandbox.destroy()
    finally:
        await pool.close()
    return {"samples": samples, "image": image, "cold_start": _ms(cold), "warm_claim_and_load": _ms(warm),
            "idle_memory_mib": {"median": round(statistics.median(memory), 2), "max": round(max(memory), 2)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("bench/results/sandbox_startup.json"))
    args = parser.parse_args()
    result = asyncio.run(run(args.samples))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
