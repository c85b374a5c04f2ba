"""A session's container killed in the middle of a call, and between calls while other calls run:
the session is rebuilt by replay, and no call is lost or recorded twice.

(A runtime that crashes by itself — ``os._exit``, ``kill -9`` of its own pid, signals to PID 1 —
is in test_hostile_envs.py, under runc and gVisor.)
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from tests.deadlines import scaled
from tests.integration.gateway_fixtures import (
    kill_sandbox,
    running_gateway,
    sandbox_handle,
    runtime_of,
)
from tests.reliability.helpers import (
    Retrier,
    audit_counter,
    audit_trajectory,
    call,
    entries,
    new_session,
    state,
)


async def test_container_killed_mid_call_runs_the_call_once_on_a_rebuilt_sandbox(
    make_settings, redis_client
) -> None:
    settings = make_settings(pool_size=2)
    async with running_gateway(settings) as (_, client):
        session_id = await new_session(client, scenario="counter-1", seed=3)
        await call(client, session_id, "increment", {"name": "a"}, call_id="c0")
        await call(client, session_id, "token", {}, call_id="c1")
        handle = sandbox_handle(redis_client, session_id)
        napping = asyncio.create_task(
            client.post(f"/v1/sessions/{session_id}/calls",
                        json={"name": "nap", "arguments": {"seconds": 1.0}, "call_id": "c2"}))
        await asyncio.sleep(0.4)  # the nap is running in the sandbox
        kill_sandbox(handle, Path(settings.socket_root))
        answer = await napping
        assert answer.status_code == 200, answer.text
        assert answer.json()["ok"] is True and answer.json()["index"] == 2
        assert runtime_of(sandbox_handle(redis_client, session_id)) != runtime_of(handle)

        again = await call(client, session_id, "nap", {"seconds": 1.0}, call_id="c2")
        assert again["duplicate"] is True and again["index"] == 2
        trajectory = await entries(client, session_id)
        audit_trajectory(trajectory, ["c0", "c1", "c2"])
        assert [e["name"] for e in trajectory] == ["increment", "token", "nap"]
        final = await state(client, session_id)
        assert final["history"][0] == "a:1->2" and final["history"][2] == "nap:1.0"
        assert len(final["history"]) == 3  # the interrupted nap left nothing behind

        # The replayed token is the recorded one: the seeded sources replayed identically.
        twin = await new_session(client, scenario="counter-1", seed=3)
        await call(client, twin, "increment", {"name": "a"})
        await call(client, twin, "token", {})
        await call(client, twin, "nap", {"seconds": 0.0})
        assert (await state(client, twin))["history"][:2] == final["history"][:2]


async def test_containers_killed_at_random_under_concurrent_calls(make_settings,
                                                                  redis_client) -> None:
    """Eight clients call their own sessions with retried call_ids while containers are killed
    every 100 ms: every acknowledged call is in its trajectory exactly once, in order, and each
    counter saw every increment exactly once."""
    settings = make_settings(pool_size=4, max_sandboxes=48)
    rng = random.Random(9)
    async with running_gateway(settings) as (_, client):
        sessions = [await new_session(client, scenario="counter-2") for _ in range(8)]
        retrier = Retrier([client], deadline=60)
        acknowledged: dict[str, list[str]] = {sid: [] for sid in sessions}
        kills = 0

        async def worker(k: int, session_id: str) -> None:
            i = 0
            while i < 40 or kills < 8:  # at least 40 calls each, and 8 kills among them
                call_id = f"w{k}-{i}"
                body = await retrier.call(session_id, "increment", {"name": "z"}, call_id)
                assert body["ok"] is True, body
                acknowledged[session_id].append(call_id)
                i += 1

        async def killer() -> None:
            nonlocal kills
            while True:
                await asyncio.sleep(0.1)
                victim = rng.choice(sessions)
                try:
                    handle = sandbox_handle(redis_client, victim)
                    await asyncio.to_thread(kill_sandbox, handle, Path(settings.socket_root))
                    kills += 1
                except Exception:  # noqa: BLE001, S110 - between a death and its rebuild: no handle
                    pass

        chaos = asyncio.create_task(killer())
        try:
            await asyncio.gather(*(worker(k, sid) for k, sid in enumerate(sessions)))
        finally:
            chaos.cancel()
        assert kills >= 8, kills
        for session_id in sessions:
            trajectory = await entries(client, session_id)
            audit_trajectory(trajectory, acknowledged[session_id])
            calls = len(acknowledged[session_id])
            assert len(trajectory) == calls
            assert audit_counter(trajectory, "z", start=10) == 10 + calls
            assert (await state(client, session_id))["counters"]["z"] == 10 + calls
        metrics = (await client.get("/metrics")).text
        assert "envscaler_replay_mismatches_total 0.0" in metrics


async def test_a_dead_heartbeat_is_restarted_and_a_failing_one_fails_readiness(
        make_settings) -> None:
    """Other instances reap the sandboxes of an instance whose heartbeat file goes stale, so the
    heartbeat task is supervised: cancelled (or crashed), it is restarted and the file stays
    fresh; while it cannot beat, /readyz answers 503 naming it, and ready again once it can."""
    async with running_gateway(make_settings()) as (app, client):
        heartbeat = app.state.backend.heartbeat
        heartbeat.interval = 0.05  # beat often: the test waits for a few beats
        await asyncio.sleep(0.1)

        def fresh() -> bool:
            return time.time() - heartbeat.path.stat().st_mtime < 1.0

        for _ in range(2):
            heartbeat._task.cancel()  # as a stray cancellation, or a crash, would end it
            await asyncio.sleep(0)
            stamp = heartbeat.path.stat().st_mtime
            await wait_until(lambda: heartbeat.path.stat().st_mtime > stamp)  # noqa: B023
            assert fresh()
        assert (await client.get("/readyz")).status_code == 200

        heartbeat.path.unlink()  # a link to nowhere: touching it fails (FileNotFoundError)
        heartbeat.path.symlink_to(heartbeat.path.parent / "no-such-directory" / "beat")
        try:
            await wait_until(lambda: heartbeat.problem() is not None)
            ready = await client.get("/readyz")
            assert ready.status_code == 503, ready.text
            error = ready.json()["components"]["sandbox_backend"]["error"]
            assert "heartbeat" in error and str(heartbeat.path) in error, error
        finally:
            heartbeat.path.unlink()
        await wait_until(lambda: heartbeat.path.is_file() and fresh())
        assert (await client.get("/readyz")).status_code == 200


async def wait_until(condition, within: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + scaled(within)
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.02)
