"""A bounded soak: many sessions and calls through a real gateway while faults are injected at
random — sessions' sandboxes killed (a slot's processes, its container's other sessions going
on), and the gateway itself killed with SIGKILL and restarted.

Clients behave as the Python client does: every call carries a call_id and is retried (same id)
after a dropped connection or a 429/5xx, honouring Retry-After. At the end:

- every trajectory is complete and consistent: indexes contiguous from 0, every acknowledged call
  present exactly once and in order, no call recorded twice, and each counter saw every increment
  exactly once (checked as its session ends, from the trajectory the gateway serves);
- nothing leaks: no container of either gateway instance is left but the warm pool's (each
  holding a warm slot at least, none claimed), and once the record TTL has passed no Redis key is
  left at all;
- memory is flat: the gateway's RSS at the end of the load is compared with its RSS after a
  warm-up period following the restart (both with the same load in flight). The bound, 8 MiB
  (a tenth of the ~80 MiB baseline), is well above the allocator's noise (under 1 MiB measured)
  and catches a leak of about 6 KiB per call or 90 KiB per session over the measured part of the
  default run (~1,400 calls, ~90 sessions); the long run (``ENVSCALER_SOAK_SECONDS=300``:
  ~10,000 calls and ~700 sessions measured) catches about 1 KiB per call. It is a measurement
  reported with the other figures, not a timing.

``ENVSCALER_SOAK_SECONDS`` sets the length of the load (default 50 s, about 75 s in all);
``ENVSCALER_SOAK_REPORT`` names a JSON file for the figures. Marked ``soak``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as redis_sync

from envscaler.server.embedded_redis import EmbeddedRedis
from envscaler.server.settings import Settings
from envscaler.server.store import LIVE_KEYS, session_key
from tests.conftest import TEST_LABELS
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import LIBRARY, GatewayProcess, kill_sandbox
from tests.reliability.helpers import (
    RETRYABLE,
    Retrier,
    audit_counter,
    audit_trajectory,
    containers_of,
    rss_mib,
)

SECONDS = float(os.environ.get("ENVSCALER_SOAK_SECONDS", "50"))
WORKERS = 24
# Longer than a session lock's lease (10 s here): a session whose lock a killed gateway held is
# not idle, and must not expire while its client waits. Sessions are abandoned (left to expire)
# only in the first ABANDON_UNTIL of the run, so that they have expired by its end.
SESSION_TTL = 15.0
RECORD_TTL = 8.0
ABANDON_UNTIL = 0.6
RSS_GROWTH_MIB = 8.0  # see the module docstring

pytestmark = [pytest.mark.soak, pytest.mark.timeout(SECONDS + 240)]


@dataclass
class Figures:
    sessions: int = 0
    deleted: int = 0
    abandoned: int = 0
    calls: int = 0
    validations: int = 0
    sandbox_kills: int = 0
    gateway_restarts: int = 0
    retries: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    rss_mib: list[tuple[float, str, float]] = field(default_factory=list)


@pytest.fixture
def soak_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path / "redis", persistent=False) as server:
        yield server


async def send(client: httpx.AsyncClient, retrier: Retrier, method: str, url: str,
               **kwargs: Any) -> tuple[httpx.Response, bool]:
    """A request repeated until it is answered with something other than 429/5xx; and whether
    an attempt was cut off (the gateway killed under it: it may have been carried out)."""
    give_up = time.monotonic() + scaled(120)
    interrupted = False
    while True:
        try:
            response = await client.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            reason, pause, interrupted = type(exc).__name__, 0.2, True
        else:
            assert "Traceback" not in response.text
            if response.status_code not in RETRYABLE:
                return response, interrupted
            reason = f"{response.status_code} {response.json()['error']['type']}"
            pause = min(float(response.headers.get("Retry-After", "1")), 2.0)
        retrier.retries += 1
        retrier.failures[reason] = retrier.failures.get(reason, 0) + 1
        assert time.monotonic() < give_up, f"{method} {url} never answered: {retrier.failures}"
        await asyncio.sleep(pause * (0.5 + random.random()))


async def episode(client: httpx.AsyncClient, retrier: Retrier, rng: random.Random,
                  figures: Figures, number: int, may_abandon: bool) -> None:
    library = rng.random() < 0.2
    body = ({"env": LIBRARY, "scenario": "library_loans-001", "seed": number} if library
            else {"env": "counter_lab", "scenario": "counter-2", "seed": number})
    created, _ = await send(client, retrier, "POST", "/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    session_id = created.json()["session_id"]
    figures.sessions += 1
    acknowledged: list[str] = []
    increments = 0
    for i in range(rng.randint(5, 25)):
        call_id = f"{number}-{i}"
        if library:
            name, arguments = rng.choice([("get_member", {"member_id": "M-1001"}),
                                          ("search_books", {"query": "the"})])
        elif rng.random() < 0.1:
            name, arguments = "token", {}
        else:
            name, arguments = "increment", {"name": "z"}
        answer = await retrier.call(session_id, name, arguments, call_id)
        assert answer["ok"] is True, answer
        increments += name == "increment"
        acknowledged.append(call_id)
        figures.calls += 1
    if rng.random() < 0.2:
        validation, _ = await send(client, retrier, "POST",
                                   f"/v1/sessions/{session_id}/validate")
        assert validation.status_code == 200, validation.text
        figures.validations += 1
    response, _ = await send(client, retrier, "GET", f"/v1/sessions/{session_id}/trajectory")
    assert response.status_code == 200, response.text
    trajectory = response.json()["entries"]
    audit_trajectory(trajectory, acknowledged)
    assert [e["call_id"] for e in trajectory] == acknowledged
    if not library:
        assert audit_counter(trajectory, "z", start=10) == 10 + increments
    abandon = may_abandon and rng.random() < 0.2
    if not abandon:
        deleted, interrupted = await send(client, retrier, "DELETE", f"/v1/sessions/{session_id}")
        # A delete cut off by the gateway's kill may have been done, and its record expired
        # (ENVSCALER_RECORD_TTL) before the new gateway answered the repeat.
        assert deleted.status_code == 200 or (interrupted and deleted.status_code == 404), \
            deleted.text
    if abandon:
        figures.abandoned += 1  # left to expire after the session TTL
    else:
        figures.deleted += 1


def claimed_sandboxes(direct: redis_sync.Redis) -> list[dict[str, Any]]:
    """The handles of the live sessions' sandboxes."""
    sessions = [sid for key in LIVE_KEYS for sid in direct.zrange(key, 0, -1)]
    records = [direct.hget(session_key(sid), "sandbox") for sid in sessions]
    return [json.loads(raw) for raw in records if raw]


def runtimes(instance: str, running: bool = True) -> list[Any]:
    return [c for c in containers_of(instance, running=running)
            if c.labels.get("envscaler.role") == "runtime"]


async def test_soak(redis_url: str, sandbox_image: str, socket_root: Path,
                    catalogue_root: Path, soak_redis: EmbeddedRedis, tmp_path: Path) -> None:
    settings = Settings(
        redis_url=soak_redis.url, catalogue=catalogue_root, sandbox_backend="docker",
        sandbox_image=sandbox_image, socket_root=socket_root, pool_size=8, max_sandboxes=96,
        call_timeout=scaled(3.0), load_timeout=scaled(3.0), session_ttl=scaled(SESSION_TTL),
        record_ttl=scaled(RECORD_TTL), log_level="WARNING",
        api_keys=[])  # the deadlines and TTLs follow the machine, in their proportions
    gateway = GatewayProcess(settings, TEST_LABELS, tmp_path / "gateway.log").start()
    figures = Figures()
    rng = random.Random(20261121)
    started = time.monotonic()
    stop_at = started + SECONDS
    restart_at = started + SECONDS * 0.3
    baseline_at = started + SECONDS * 0.55
    abandon_until = started + SECONDS * ABANDON_UNTIL
    direct = redis_sync.Redis.from_url(soak_redis.url, decode_responses=True)

    def sample(phase: str) -> float:
        assert gateway.process is not None
        rss = rss_mib(gateway.process.pid)
        figures.rss_mib.append((round(time.monotonic() - started, 1), phase, round(rss, 1)))
        return rss

    try:
        limits = httpx.Limits(max_connections=WORKERS * 2, max_keepalive_connections=WORKERS * 2)
        async with httpx.AsyncClient(base_url=gateway.url, timeout=scaled(60),
                                     limits=limits) as client:
            retrier = Retrier([client], deadline=120, seed=1)
            counter = iter(range(10**9))

            async def worker(k: int) -> None:
                worker_rng = random.Random(k)
                while time.monotonic() < stop_at:
                    await episode(client, retrier, worker_rng, figures, next(counter),
                                  time.monotonic() < abandon_until)

            async def chaos() -> None:
                restarted = False
                baseline_taken = False
                while time.monotonic() < stop_at:
                    await asyncio.sleep(rng.uniform(0.5, 2.0))
                    now = time.monotonic()
                    if not restarted and now >= restart_at:
                        gateway.kill()
                        await asyncio.to_thread(gateway.start)
                        figures.gateway_restarts += 1
                        restarted = True
                        continue
                    if restarted and not baseline_taken and now >= baseline_at:
                        sample("baseline (warmed up after the restart)")
                        baseline_taken = True
                    victims = await asyncio.to_thread(claimed_sandboxes, direct)
                    if victims:
                        victim = rng.choice(victims)
                        try:
                            await asyncio.to_thread(kill_sandbox, victim, socket_root)
                            figures.sandbox_kills += 1
                        except Exception:  # noqa: BLE001, S110 - it went away by itself meanwhile
                            pass
                    if restarted and baseline_taken:
                        sample("load")

            await asyncio.gather(chaos(), *(worker(k) for k in range(WORKERS)))
            load_seconds = time.monotonic() - started
            end_rss = sample("end of load")
            figures.retries = retrier.retries
            figures.failures = retrier.failures

            metrics = (await client.get("/metrics")).text
            assert "envscaler_replay_mismatches_total 0.0" in metrics

            # Leaks. Abandoned sessions expire after the session TTL; the dead instance's
            # containers are reaped once its heartbeat is stale; then only the pool's containers
            # (each with a warm slot at least: one goes with its last slot) and the checkers.
            dead, live = gateway.instances[0], gateway.instances[-1]
            deadline = time.monotonic() + scaled(60)
            while True:
                pool = (await client.get("/readyz")).json()["pool"]
                left = {"dead instance": len(containers_of(dead)),
                        "claimed slots": pool["live"] - pool["ready"],
                        "stopped": len(containers_of(live, running=False)),
                        "live sessions": sum(direct.zcard(key) for key in LIVE_KEYS)}
                checkers = len(containers_of(live)) - len(runtimes(live))
                if not any(left.values()) and checkers == settings.checkers \
                        and len(runtimes(live)) <= pool["ready"]:
                    break
                assert time.monotonic() < deadline, f"left behind: {left}"
                await asyncio.sleep(1)
            deadline = time.monotonic() + scaled(RECORD_TTL + 15)  # records, then locks' leases
            while keys := direct.keys("envscaler:*"):
                assert time.monotonic() < deadline, f"{len(keys)} Redis keys left: {keys[:5]}"
                await asyncio.sleep(1)
            sample("idle after the records expired")
    finally:
        gateway.stop()
        gateway.remove_sandboxes(socket_root)
        summary = {"load_seconds": round(locals().get("load_seconds", 0.0), 1),
                   **{k: v for k, v in vars(figures).items()}}
        print("\nsoak figures:", json.dumps(summary, indent=1))
        if os.environ.get("ENVSCALER_SOAK_REPORT"):
            Path(os.environ["ENVSCALER_SOAK_REPORT"]).write_text(json.dumps(summary, indent=1))

    assert figures.gateway_restarts == 1 and figures.sandbox_kills >= 5
    assert figures.sessions >= 100 and figures.calls >= 1000, figures
    baseline = next(rss for _, phase, rss in figures.rss_mib if phase.startswith("baseline"))
    assert end_rss - baseline < RSS_GROWTH_MIB, figures.rss_mib
