"""Gateways killed with SIGKILL while concurrent clients call, retrying with their call_ids: after
a restart, or with a second gateway on the same Redis taking over, every acknowledged call is in
its session's trajectory exactly once, in order, and the state saw each call exactly once."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from tests.conftest import TEST_LABELS
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import GatewayProcess, runtime_of
from tests.reliability.helpers import (
    Retrier,
    audit_counter,
    audit_trajectory,
    entries,
    new_session,
    state,
)

CLIENTS = 12
CALLS = 30


def fault_settings(make_settings):  # type: ignore[no-untyped-def]
    # Short deadlines keep the session locks' lease short (max(10, 2 * 3 + 5) = 11 s): a lock
    # held by a killed gateway frees itself when its lease runs out.
    return make_settings(pool_size=4, max_sandboxes=64, call_timeout=2.0, load_timeout=3.0)


async def run_load(retrier: Retrier, sessions: list[str], progress: list[int],
                   acknowledged: dict[str, list[str]], rng: random.Random) -> None:
    async def worker(k: int, session_id: str) -> None:
        for i in range(CALLS):
            call_id = f"k{k}-{i}"
            body = await retrier.call(session_id, "increment", {"name": "z"}, call_id,
                                      start=rng.randrange(len(retrier.clients)))
            assert body["ok"] is True, body
            acknowledged[session_id].append(call_id)
            progress[0] += 1

    await asyncio.gather(*(worker(k, sid) for k, sid in enumerate(sessions)))


async def audit(client, sessions: list[str], acknowledged: dict[str, list[str]]) -> None:  # type: ignore[no-untyped-def]
    for session_id in sessions:
        trajectory = await entries(client, session_id)
        audit_trajectory(trajectory, acknowledged[session_id])
        assert [e["call_id"] for e in trajectory] == acknowledged[session_id]
        assert audit_counter(trajectory, "z", start=10) == 10 + CALLS
        assert (await state(client, session_id))["counters"]["z"] == 10 + CALLS


async def wait_for(progress: list[int], calls: int) -> None:
    deadline = time.monotonic() + scaled(60)
    while progress[0] < calls:
        assert time.monotonic() < deadline, "the load made no progress"
        await asyncio.sleep(0.01)


async def test_gateway_sigkill_under_load_and_restart(make_settings, tmp_path) -> None:
    settings = fault_settings(make_settings)
    gateway = GatewayProcess(settings, TEST_LABELS, tmp_path / "gateway.log").start()
    try:
        async with gateway.client() as client:
            sessions = [await new_session(client, scenario="counter-2") for _ in range(CLIENTS)]
            napper = await new_session(client, scenario="counter-2")
            retrier = Retrier([client], deadline=90)
            acknowledged: dict[str, list[str]] = {sid: [] for sid in sessions}
            progress = [0]
            load = asyncio.create_task(
                run_load(retrier, sessions, progress, acknowledged, random.Random(1)))
            await wait_for(progress, CLIENTS * CALLS // 3)
            # A call surely in flight when the gateway dies, however fast the others are.
            nap = asyncio.create_task(retrier.call(napper, "nap", {"seconds": 0.5}, "nap-1"))
            await asyncio.sleep(0.2)
            gateway.kill()  # mid-load: calls in flight, locks held, sandboxes ahead of Redis
            gateway.start()
            await load
            assert (await nap)["ok"] is True
            assert retrier.retries > 0
            await audit(client, sessions, acknowledged)
            metrics = (await client.get("/metrics")).text
            assert "envscaler_replay_mismatches_total 0.0" in metrics
    finally:
        gateway.stop()
        gateway.remove_sandboxes(Path(settings.socket_root))


async def test_two_gateways_on_one_redis_one_killed_while_both_serve(make_settings,
                                                                      tmp_path) -> None:
    settings = fault_settings(make_settings)
    first = GatewayProcess(settings, TEST_LABELS, tmp_path / "first.log").start()
    second = GatewayProcess(settings, TEST_LABELS, tmp_path / "second.log").start()
    try:
        async with first.client() as a, second.client() as b:
            sessions = [await new_session(c, scenario="counter-2")
                        for c in [a, b] * (CLIENTS // 2)]
            retrier = Retrier([a, b], deadline=90)
            acknowledged: dict[str, list[str]] = {sid: [] for sid in sessions}
            progress = [0]
            load = asyncio.create_task(
                run_load(retrier, sessions, progress, acknowledged, random.Random(2)))
            await wait_for(progress, CLIENTS * CALLS // 3)
            first.kill()  # the other keeps serving every session, its own and the dead one's
            await load
            assert retrier.retries > 0
            await audit(b, sessions, acknowledged)
            metrics = (await b.get("/metrics")).text
            assert "envscaler_replay_mismatches_total 0.0" in metrics
            assert (await b.get("/readyz")).status_code == 200
    finally:
        first.kill()
        second.stop()
        first.remove_sandboxes(Path(settings.socket_root))


async def test_a_held_sandbox_that_another_gateway_ran_an_unrecorded_call_on_is_not_used(
    make_settings, redis_client
) -> None:
    """Two gateways both hold a session's sandbox (each attached to it once). One runs a call and
    dies before recording it. The other must not go on from that state: the runtime refuses an
    operation whose expected call count differs (``Diverged``), and the session is rebuilt."""
    from envscaler.sandbox.backends import SandboxHandle, make_backend
    from envscaler.sandbox.sandbox import Sandbox
    from tests.integration.gateway_fixtures import running_gateway, sandbox_handle
    from tests.reliability.helpers import call

    settings = make_settings()
    async with running_gateway(settings) as (_, first), \
            running_gateway(make_settings()) as (_, second):
        session_id = await new_session(first, scenario="counter-1")
        await call(first, session_id, "increment", {"name": "a"})
        await call(second, session_id, "increment", {"name": "a"})  # the second holds it too
        handle = sandbox_handle(redis_client, session_id)
        dying = Sandbox(SandboxHandle.from_dict(handle),
                        make_backend(settings.sandbox_config(image=settings.sandbox_image or ""),
                                     "dying"))
        try:  # what the first gateway did just before it died: run, and never record
            await dying.call("increment", {"name": "a"}, timeout=scaled(5))
        finally:
            dying.client.close()
        answer = await call(second, session_id, "increment", {"name": "a"})
        assert answer["result"]["data"] == {"name": "a", "before": 3, "value": 4}
        assert (await state(second, session_id))["counters"]["a"] == 4
        trajectory = await entries(second, session_id)
        assert audit_counter(trajectory, "a", start=1) == 4
        assert runtime_of(sandbox_handle(redis_client, session_id)) != runtime_of(handle)
        # and reads refuse the diverged state too
        other = await new_session(first, scenario="counter-1")
        await call(second, other, "increment", {"name": "a"})
        handle = sandbox_handle(redis_client, other)
        dying = Sandbox(SandboxHandle.from_dict(handle),
                        make_backend(settings.sandbox_config(image=settings.sandbox_image or ""),
                                     "dying"))
        try:
            await dying.call("increment", {"name": "a"}, timeout=scaled(5))
        finally:
            dying.client.close()
        assert (await state(second, other))["counters"]["a"] == 2
