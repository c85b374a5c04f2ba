"""The rollout pattern a trainer pays for, through the Python client: concurrent episodes, each a
scenario's reference solution between a session's start and its validation, by one
`envscaler_client.AsyncEnvClient` with its connections sized to the lanes (as `envscaler rollout`
makes it). Runs as its own process, so the client's CPU (``time.process_time``) is its own.

    python -m envscaler.bench.rollouts < spec.json > result.json

spec: ``{"url", "pattern", "window", "lanes": [[{"env", "scenario", "solution"}, ...], ...]}``, and
``"transport"`` naming one of `envscaler.bench.client_transport.CANDIDATES` to measure it instead;
``"sessions"``: ``[id, agent_token]`` per lane, sessions opened before (the ``reset`` pattern then
attaches to them and leaves them open).
Each lane is one concurrent trainer worker, on one environment; it runs its episodes one after
another, cycling, and starts new ones for ``window`` seconds (one at least). Patterns:

- ``open``: each episode opens a session on its scenario, replays the solution, validates, closes;
- ``reset``: each lane opens one session first (on its last scenario, before the window), then each
  episode resets it to the lane's next scenario, replays, validates; the sessions close after.
  Opening all and closing all are timed as wholes too, with the machine's ``MemAvailable`` before
  and after opening (the batch phase's memory per live session).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from envscaler.bench.procstat import mem_available
from envscaler.bench.stats import summary

T = TypeVar("T")
PATTERNS = ("open", "reset")


@dataclass
class Tally:
    """What every episode of a run measured; latencies in seconds."""

    steps: dict[str, list[float]] = field(default_factory=lambda: {
        "open": [], "reset": [], "call": [], "validate": [], "close": []})
    rewards: list[float] = field(default_factory=list)
    scenarios: set[str] = field(default_factory=set)
    below: dict[str, float] = field(default_factory=dict)  # scenario -> lowest reward under 1.0
    errors: dict[str, int] = field(default_factory=dict)  # episodes that raised, by error type
    error_samples: list[str] = field(default_factory=list)
    tool_errors: dict[str, int] = field(default_factory=dict)  # calls answered ok=false, by type
    check_errors: dict[str, int] = field(default_factory=dict)  # checks that failed to run

    async def timed(self, step: str, operation: Awaitable[T]) -> T:
        started = time.perf_counter()
        result = await operation
        self.steps[step].append(time.perf_counter() - started)
        return result

    def error(self, exc: Exception) -> None:
        kind = str(getattr(exc, "type", None) or type(exc).__name__)
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if len(self.error_samples) < 5:
            self.error_samples.append(f"{type(exc).__name__}: {exc}"[:300])


async def _play(session: Any, job: dict[str, Any], tally: Tally) -> None:
    """The reference solution, then validation: the part of an episode both patterns share."""
    for call in job["solution"]:
        answer = await tally.timed("call", session.call(call["name"], call["arguments"]))
        if not answer.ok:
            kind = answer.error.type if answer.error else "?"
            tally.tool_errors[kind] = tally.tool_errors.get(kind, 0) + 1
    validation = await tally.timed("validate", session.validate())
    key = f"{job['env']}/{job['scenario']}"
    tally.rewards.append(validation.reward)
    tally.scenarios.add(key)
    if validation.reward < 1.0:
        tally.below[key] = min(tally.below.get(key, 1.0), validation.reward)
    for check in validation.checks:
        if check.error:
            kind = check.error.split(":")[0][:60]
            tally.check_errors[kind] = tally.check_errors.get(kind, 0) + 1


async def _open_lane(client: Any, lane: list[dict[str, Any]], until: float, tally: Tally) -> None:
    for index in _indices(len(lane), until):
        job = lane[index]
        session = await tally.timed("open", client.create_session(job["env"], job["scenario"]))
        try:
            await _play(session, job, tally)
        finally:
            await tally.timed("close", session.close())


async def reset_lane(session: Any, lane: list[dict[str, Any]], until: float,
                      tally: Tally) -> None:
    for index in _indices(len(lane), until):
        job = lane[index]
        await tally.timed("reset", session.reset(scenario=job["scenario"]))
        await _play(session, job, tally)


def _indices(size: int, until: float) -> Iterator[int]:
    """0, 1, 2... modulo ``size``: the first at once, the next ones while the window is open."""
    index = 0
    while True:
        yield index % size
        index += 1
        if time.perf_counter() >= until:
            return


async def guarded(lane: Awaitable[None], tally: Tally) -> None:
    """A lane that fails stops there (its session may be unusable); the error is counted."""
    try:
        await lane
    except Exception as exc:  # noqa: BLE001 - counted and reported
        tally.error(exc)


def make_client(spec: dict[str, Any]) -> Any:
    """The client measured: the transport candidate the spec names, else `AsyncEnvClient` with
    a connection per lane (what the adapters and `envscaler rollout` give it)."""
    if spec.get("transport"):
        from envscaler.bench.client_transport import candidate_client

        return candidate_client(spec["transport"], spec["url"], len(spec["lanes"]))
    from envscaler_client import AsyncEnvClient, connection_limits

    return AsyncEnvClient(spec["url"], limits=connection_limits(len(spec["lanes"])))


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    pattern, lanes, window = spec["pattern"], spec["lanes"], float(spec["window"])
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}")
    tally = Tally()
    batch: dict[str, Any] = {}
    async with make_client(spec) as client:
        sessions: list[Any] = []
        if pattern == "reset" and spec.get("sessions"):
            sessions = list(await asyncio.gather(*(client.session(*pair)
                                                   for pair in spec["sessions"])))
        elif pattern == "reset":
            sessions, batch["open_all"], batch["memory"] = await _open_sessions(client, lanes,
                                                                                tally)
        cpu_before, started = time.process_time(), time.perf_counter()
        until = started + window
        if pattern == "reset":
            work = [reset_lane(s, lane, until, tally) for s, lane in zip(sessions, lanes,
                                                                         strict=True) if s]
        else:
            work = [_open_lane(client, lane, until, tally) for lane in lanes]
        await asyncio.gather(*(guarded(lane, tally) for lane in work))
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        if "open_all" in batch:
            batch["close_all"] = await _close_sessions([s for s in sessions if s], tally)
    client_name = spec.get("transport") or "envscaler_client.AsyncEnvClient, a connection per lane"
    return _result(pattern, len(lanes), window, wall, cpu, tally) | batch | {"client": client_name}


async def _open_sessions(client: Any, lanes: list[list[dict[str, Any]]], tally: Tally
                         ) -> tuple[list[Any], dict[str, Any], dict[str, float]]:
    """A session per lane, all at once, on the lane's last scenario (so that its first episode
    resets to another one); None where opening failed (counted). Also how long opening them all
    took, what failed, and the machine's available memory before and after (MiB)."""
    available_before, started = mem_available(), time.perf_counter()
    opened = await asyncio.gather(*(
        tally.timed("open", client.create_session(lane[-1]["env"], lane[-1]["scenario"]))
        for lane in lanes), return_exceptions=True)
    seconds = time.perf_counter() - started
    await asyncio.sleep(1.0)  # the new sandboxes settle to their idle footprint
    available_after = mem_available()
    sessions, failures = [], Tally()
    for session in opened:
        if isinstance(session, Exception):
            tally.error(session)
            failures.error(session)
            session = None
        sessions.append(session)
    failed = sum(failures.errors.values())
    opening = {"seconds": round(seconds, 3), "opened": len(lanes) - failed, "failed": failed,
               "failures": failures.errors, "failure_samples": failures.error_samples}
    memory = {"available_before_mib": round(available_before / 2**20, 1),
              "available_after_mib": round(available_after / 2**20, 1)}
    return sessions, opening, memory


async def _close_sessions(sessions: list[Any], tally: Tally) -> dict[str, Any]:
    """Every live session closed at once: how long that took, and how many failed to close."""
    failures, started = Tally(), time.perf_counter()
    await asyncio.gather(*(guarded(tally.timed("close", s.close()), failures) for s in sessions))
    for kind, count in failures.errors.items():
        tally.errors[kind] = tally.errors.get(kind, 0) + count
    return {"seconds": round(time.perf_counter() - started, 3), "closed": len(sessions) -
            sum(failures.errors.values()), "failed": sum(failures.errors.values())}


def _result(pattern: str, lanes: int, window: float, wall: float, cpu: float,
            tally: Tally) -> dict[str, Any]:
    done = len(tally.rewards)
    perfect = sum(1 for reward in tally.rewards if reward == 1.0)
    in_window = ("reset", "call", "validate") + (("open", "close") if pattern == "open" else ())
    requests = sum(len(tally.steps[step]) for step in in_window)
    return {"pattern": pattern,
            "concurrency": lanes, "window_seconds": window, "episodes": done,
            "scenarios": len(tally.scenarios), "wall_seconds": round(wall, 3),
            "episodes_per_second": round(done / wall, 2),
            "calls_per_second": round(len(tally.steps["call"]) / wall, 1),
            "rewards": {"1.0": perfect, "below_1": done - perfect},
            "rewards_below_1": tally.below, "errors": tally.errors,
            "error_samples": tally.error_samples, "tool_errors": tally.tool_errors,
            "check_errors": tally.check_errors,
            **{step: summary(samples) for step, samples in tally.steps.items()},
            "requests": requests, "cpu_seconds": round(cpu, 3), "cpu_share": round(cpu / wall, 3),
            "cpu_ms_per_request": round(1000 * cpu / requests, 3) if requests else None}


def spawn(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "envscaler.bench.rollouts"], input=json.dumps(spec),
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the rollout client failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> None:
    spec = json.load(sys.stdin)
    sys.stdout.write(json.dumps(asyncio.run(run(spec))) + "\n")


if __name__ == "__main__":
    main()
