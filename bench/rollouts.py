"""The rollout pattern through the Python client: hundreds of sessions at once, each created from
a scenario, driven through its reference solution, validated and closed, by one
`envscaler_client.AsyncEnvClient` with its default settings (as `envscaler rollout` makes it).
Runs as its own process, so the client's CPU is its own.

    python -m bench.rollouts < spec.json > result.json

spec: ``{"url": ..., "episodes": [{"env", "scenario", "solution": [{"name", "arguments"}]}]}``;
every episode starts at once.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any

from bench.stats import summary


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    from envscaler_client import AsyncEnvClient

    creates: list[float] = []
    calls: list[float] = []
    validates: list[float] = []
    closes: list[float] = []
    rewards: list[float] = []
    errors: list[str] = []
    tool_errors: dict[str, int] = {}  # calls answered ok=false, by error type
    below: dict[str, float] = {}  # scenario -> lowest reward under 1.0
    check_errors: dict[str, int] = {}  # check functions that failed to run, by error

    async def episode(client: AsyncEnvClient, job: dict[str, Any]) -> None:
        try:
            started = time.perf_counter()
            session = await client.create_session(job["env"], job["scenario"])
            creates.append(time.perf_counter() - started)
            try:
                for call in job["solution"]:
                    started = time.perf_counter()
                    answer = await session.call(call["name"], call["arguments"])
                    calls.append(time.perf_counter() - started)
                    if not answer.ok:
                        kind = answer.error.type if answer.error else "?"
                        tool_errors[kind] = tool_errors.get(kind, 0) + 1
                started = time.perf_counter()
                validation = await session.validate()
                validates.append(time.perf_counter() - started)
                rewards.append(validation.reward)
                if validation.reward < 1.0:
                    key = f"{job['env']}/{job['scenario']}"
                    below[key] = min(below.get(key, 1.0), validation.reward)
                for check in validation.checks:
                    if check.error:
                        kind = check.error.split(":")[0][:60]
                        check_errors[kind] = check_errors.get(kind, 0) + 1
            finally:
                started = time.perf_counter()
                await session.close()
                closes.append(time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - counted and reported
            errors.append(f"{type(exc).__name__}: {exc}"[:300])

    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    async with AsyncEnvClient(spec["url"]) as client:
        await asyncio.gather(*(episode(client, job) for job in spec["episodes"]))
    wall = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu_before
    return {"client": "envscaler_client.AsyncEnvClient (defaults)",
            "episodes": len(spec["episodes"]), "completed": len(rewards),
            "errors": len(errors), "error_samples": errors[:5], "tool_errors": tool_errors,
            "mean_reward": round(sum(rewards) / len(rewards), 4) if rewards else None,
            "rewards_below_1": below, "check_errors": check_errors,
            "wall_seconds": round(wall, 3), "episodes_per_second": round(len(rewards) / wall, 2),
            "calls_per_second": round(len(calls) / wall, 1),
            "create": summary(creates), "call": summary(calls), "validate": summary(validates),
            "close": summary(closes),
            "cpu_seconds": round(cpu, 3), "cpu_share": round(cpu / wall, 3)}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def spawn(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "bench.rollouts"], input=json.dumps(spec),
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the rollout client failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> None:
    spec = json.load(sys.stdin)
    sys.stdout.write(json.dumps(asyncio.run(run(spec))) + "\n")


if __name__ == "__main__":
    main()
