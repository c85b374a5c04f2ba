"""Sessions survive what kills sandboxes and gateways: deterministic replay, idempotent retries,
per-session serialization, several gateways on one Redis, and gateway restarts."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

from envscaler.format.loader import load_env
from envscaler.sandbox.backends import SandboxHandle, make_backend
from envscaler.sandbox.sandbox import Sandbox
from tests.conftest import TEST_LABELS
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import (
    COUNTER,
    LIBRARY,
    REPO_ROOT,
    GatewayProcess,
    kill_sandbox,
    running_gateway,
    sandbox_alive,
    sandbox_handle,
    runtime_of,
)

SCENARIO = load_env(REPO_ROOT / "generated_envs" / LIBRARY).scenario("library_loans-001")


async def new_session(client, env: str = COUNTER, **body) -> str:  # type: ignore[no-untyped-def]
    response = await client.post("/v1/sessions", json={"env": env, **body})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


async def call(client, session_id: str, name: str, arguments: dict, **extra) -> dict:  # type: ignore[no-untyped-def]
    response = await client.post(
        f"/v1/sessions/{session_id}/calls", json={"name": name, "arguments": arguments, **extra}
    )
    assert response.status_code == 200, response.text
    return response.json()


async def state(client, session_id: str) -> dict:  # type: ignore[no-untyped-def]
    response = await client.get(f"/v1/sessions/{session_id}/state")
    assert response.status_code == 200, response.text
    return response.json()["state"]


async def entries(client, session_id: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in metrics"
    return float(match.group(1))


async def test_repeated_call_id_executes_once(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        session_id = await new_session(client, scenario="counter-1")
        first = await call(client, session_id, "increment", {"name": "a"}, call_id="retry-me")
        again = await call(client, session_id, "increment", {"name": "a"}, call_id="retry-me")
        assert first["duplicate"] is False and again["duplicate"] is True
        assert (
            again["result"]
            == first["result"]
            == {"success": True, "data": {"name": "a", "before": 1, "value": 2}}
        )
        assert again["index"] == first["index"] == 0
        # concurrent retries of one new call: exactly one runs
        answers = await asyncio.gather(
            *(
                client.post(
                    f"/v1/sessions/{session_id}/calls",
                    json={"name": "increment", "arguments": {"name": "a"}, "call_id": "burst"},
                )
                for _ in range(6)
            )
        )
        bodies = [a.json() for a in answers]
        assert {b["index"] for b in bodies} == {1}
        assert sum(not b["duplicate"] for b in bodies) == 1
        assert {json.dumps(b["result"]) for b in bodies} == {
            json.dumps({"success": True, "data": {"name": "a", "before": 2, "value": 3}})
        }
        assert [e["call_id"] for e in await entries(client, session_id)] == ["retry-me", "burst"]
        assert (await state(client, session_id))["counters"]["a"] == 3


async def test_calls_on_one_session_never_interleave(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        session_id = await new_session(client, scenario="counter-1")  # a starts at 1
        answers = await asyncio.gather(
            *(
                client.post(
                    f"/v1/sessions/{session_id}/calls",
                    json={"name": "increment", "arguments": {"name": "a"}},
                )
                for _ in range(20)
            )
        )
        assert all(a.status_code == 200 for a in answers)
        indexes = sorted(a.json()["index"] for a in answers)
        assert indexes == list(range(20))
        trajectory = await entries(client, session_id)
        assert [e["index"] for e in trajectory] == list(range(20))
        # entry i saw exactly the state left by entry i - 1
        assert [e["result"]["data"]["before"] for e in trajectory] == list(range(1, 21))
        final = await state(client, session_id)
        assert final["counters"]["a"] == 21
        assert final["history"] == [f"a:{n}->{n + 1}" for n in range(1, 21)]


async def test_sessions_run_in_parallel_but_one_session_runs_in_sequence(make_settings) -> None:
    async with running_gateway(make_settings(pool_size=2)) as (_, client):
        one = await new_session(client, scenario="counter-1")
        two = await new_session(client, scenario="counter-1")
        started = time.monotonic()
        await asyncio.gather(
            call(client, one, "nap", {"seconds": 0.6}), call(client, two, "nap", {"seconds": 0.6})
        )
        parallel = time.monotonic() - started
        started = time.monotonic()
        await asyncio.gather(
            call(client, one, "nap", {"seconds": 0.4}), call(client, one, "nap", {"seconds": 0.4})
        )
        serial = time.monotonic() - started
        assert parallel < 1.0, parallel
        assert serial >= 0.8, serial


async def test_killed_sandbox_is_rebuilt_by_replay_exactly(make_settings, redis_client) -> None:
    settings = make_settings(pool_size=2)
    async with running_gateway(settings) as (app, client):
        victim = await new_session(client, LIBRARY, scenario=SCENARIO.id, seed=11)
        twin = await new_session(client, LIBRARY, scenario=SCENARIO.id, seed=11)
        solution = list(SCENARIO.solution)
        for step in solution[:4]:  # return_book makes a fine with a fresh id from the seeded uuid
            answers = [await call(client, sid, step.name, step.arguments) for sid in (victim, twin)]
            assert answers[0]["result"] == answers[1]["result"]
        for sid in (victim, twin):  # a failing tool call is replayed too
            await call(client, sid, "renew_loan", {"loan_id": "L-none"})
        before = await state(client, victim)
        handle = sandbox_handle(redis_client, victim)
        kill_sandbox(handle, Path(settings.socket_root))

        assert await state(client, victim) == before == await state(client, twin)
        assert runtime_of(sandbox_handle(redis_client, victim)) != runtime_of(handle)
        for step in solution[4:] + [solution[0]]:
            answers = [await call(client, sid, step.name, step.arguments) for sid in (victim, twin)]
            assert answers[0]["result"] == answers[1]["result"], step
        assert await state(client, victim) == await state(client, twin)
        for sid in (victim, twin):
            assert (await client.post(f"/v1/sessions/{sid}/validate")).json()["reward"] == 1.0
        metrics = (await client.get("/metrics")).text
        assert metric(metrics, "envscaler_session_rebuilds_total") == 1.0
        assert metric(metrics, "envscaler_replay_mismatches_total") == 0.0


async def test_random_ids_and_clock_continue_identically_after_a_rebuild(
    make_settings, redis_client
) -> None:
    settings = make_settings(pool_size=2)
    async with running_gateway(settings) as (_, client):
        victim = await new_session(client, scenario="counter-1", seed=5)
        twin = await new_session(client, scenario="counter-1", seed=5)
        for sid in (victim, twin):
            await call(client, sid, "token", {})
            await call(client, sid, "explode", {"message": "recorded and replayed"})
            await call(client, sid, "token", {})
        kill_sandbox(sandbox_handle(redis_client, victim), Path(settings.socket_root))
        for _ in range(3):
            tokens = [(await call(client, sid, "token", {}))["result"] for sid in (victim, twin)]
            assert tokens[0] == tokens[1]
        assert await state(client, victim) == await state(client, twin)


async def test_sandbox_dying_during_a_call_is_recorded_and_the_session_goes_on(
    make_settings, redis_client
) -> None:
    settings = make_settings()
    async with running_gateway(settings) as (_, client):
        session_id = await new_session(client, scenario="counter-1")
        await call(client, session_id, "increment", {"name": "a"})
        crashed = await call(
            client, session_id, "crash", {}
        )  # dies on the first try and on the retry
        assert crashed["ok"] is False and crashed["error"]["type"] == "SandboxCrashed"
        after = await call(client, session_id, "increment", {"name": "a"})
        assert after["result"]["data"] == {"name": "a", "before": 2, "value": 3}
        trajectory = await entries(client, session_id)
        assert [(e["name"], e["ok"], e["replay"]) for e in trajectory] == [
            ("increment", True, True),
            ("crash", False, False),
            ("increment", True, True),
        ]
        assert (await state(client, session_id))["history"] == ["a:1->2", "a:2->3"]
        metrics = (await client.get("/metrics")).text
        assert metric(metrics, 'envscaler_sandbox_failures_total{reason="crash"}') >= 2.0


async def test_a_second_gateway_serves_a_session_the_first_created(make_settings, tmp_path) -> None:
    settings = make_settings(pool_size=1)
    first = GatewayProcess(settings, TEST_LABELS, tmp_path / "first.log").start()
    second = GatewayProcess(settings, TEST_LABELS, tmp_path / "second.log").start()
    try:
        async with first.client() as a, second.client() as b:
            session_id = await new_session(a, scenario="counter-1")
            befores = []
            for client in (b, a, b, a):
                befores.append(
                    (await call(client, session_id, "increment", {"name": "a"}))["result"]["data"][
                        "before"
                    ]
                )
            assert befores == [1, 2, 3, 4]
            assert (await b.get(f"/v1/sessions/{session_id}")).json()["step"] == 4
            assert await state(a, session_id) == await state(b, session_id)
            # concurrent calls through both gateways are still serialized
            answers = await asyncio.gather(
                *(
                    client.post(
                        f"/v1/sessions/{session_id}/calls",
                        json={"name": "increment", "arguments": {"name": "a"}},
                    )
                    for client in [a, b] * 5
                )
            )
            assert sorted(r.json()["index"] for r in answers) == list(range(4, 14))
            trajectory = await entries(b, session_id)
            assert [e["result"]["data"]["before"] for e in trajectory] == list(range(1, 15))

            first.kill()  # the creating gateway dies without any clean-up
            assert (await call(b, session_id, "increment", {"name": "a"}))["result"]["data"][
                "before"
            ] == 15
            assert (await state(b, session_id))["counters"]["a"] == 16
            assert (await b.post(f"/v1/sessions/{session_id}/validate")).json()["total"] == 2
            assert (await b.delete(f"/v1/sessions/{session_id}")).json()["status"] == "closed"
    finally:
        first.kill()
        second.stop()
        first.remove_sandboxes(Path(settings.socket_root))


async def test_gateway_restart_mid_session_keeps_state_by_replay(
    make_settings, redis_client, tmp_path
) -> None:
    settings = make_settings(pool_size=1)
    gateway = GatewayProcess(settings, TEST_LABELS, tmp_path / "gateway.log").start()
    try:
        async with gateway.client() as client:
            session_id = await new_session(client, LIBRARY, scenario=SCENARIO.id, seed=2)
            results = [
                await call(client, session_id, s.name, s.arguments) for s in SCENARIO.solution[:5]
            ]
            assert all(r["ok"] for r in results)
            before = await state(client, session_id)
        handle = sandbox_handle(redis_client, session_id)
        gateway.kill()
        if settings.sandbox_backend == "process":  # these die with their gateway; containers may not
            deadline = time.monotonic() + scaled(5)
            while sandbox_alive(handle, Path(settings.socket_root)):
                assert time.monotonic() < deadline, "the sandbox outlived its gateway"
                await asyncio.sleep(0.05)
        gateway.start()
        async with gateway.client() as client:
            assert await state(client, session_id) == before
            for step in SCENARIO.solution[5:]:
                assert (await call(client, session_id, step.name, step.arguments))["ok"]
            assert (await client.post(f"/v1/sessions/{session_id}/validate")).json()[
                "reward"
            ] == 1.0
            trajectory = await entries(client, session_id)
            assert [e["name"] for e in trajectory] == [s.name for s in SCENARIO.solution]
            if settings.sandbox_backend == "process":
                metrics = (await client.get("/metrics")).text
                assert metric(metrics, "envscaler_session_rebuilds_total") == 1.0
                assert metric(metrics, "envscaler_replay_mismatches_total") == 0.0
    finally:
        gateway.stop()
        gateway.remove_sandboxes(Path(settings.socket_root))


async def test_sandbox_that_ran_an_unrecorded_call_is_not_attached(make_settings, redis_client) -> None:
    """A gateway that dies between running a call and recording it leaves a sandbox ahead of the
    trajectory. Another gateway must not attach to it: it rebuilds, and the stray effect is gone."""
    settings = make_settings()
    async with running_gateway(settings) as (_, first):
        session_id = await new_session(first, scenario="counter-1")
        await call(first, session_id, "increment", {"name": "a"})
        recorded = await state(first, session_id)
        handle = sandbox_handle(redis_client, session_id)
        stray = Sandbox(SandboxHandle.from_dict(handle),
                        make_backend(settings.sandbox_config(image=settings.sandbox_image or ""), "stray"))
        try:
            await stray.call("increment", {"name": "a"}, timeout=scaled(5))  # runs, never recorded
        finally:
            stray.client.close()
        async with running_gateway(make_settings()) as (_, second):
            assert await state(second, session_id) == recorded
            answer = await call(second, session_id, "increment", {"name": "a"})
            assert answer["result"]["data"] == {"name": "a", "before": 2, "value": 3}
        assert runtime_of(sandbox_handle(redis_client, session_id)) != runtime_of(handle)
