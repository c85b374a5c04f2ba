"""Containers are recycled between sessions: the keeper kills every process, wipes /tmp and starts
a fresh runtime, so the next session in the same container sees nothing of the last one, however
hard that one tried to leave traces (tests/fixtures/hostile_envs/lingerer)."""

from __future__ import annotations

import asyncio

import pytest

from envscaler.sandbox import pool as pool_module
from tests.integration.gateway_fixtures import running_gateway
from tests.reliability.helpers import call, new_session

FRESH_SOCKET_MODE = "0o777"


async def _container(app, session_id: str) -> str:
    return app.state.service.sandboxes.held[session_id].id


async def _recycled(app, count: int) -> None:
    for _ in range(1200):  # a minute: a recycle on a loaded machine can take seconds
        if app.state.pool.stats().recycled >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no sandbox was recycled: {app.state.pool.stats()}")


@pytest.mark.parametrize("runtime", [None, "runsc"])
async def test_the_next_session_in_a_recycled_container_sees_nothing_of_the_last(
        make_settings, runtime) -> None:
    settings = make_settings(pool_size=1, sandbox_runtime=runtime,
                             sandbox_pids=128 if runtime else 64)
    async with running_gateway(settings) as (app, client):
        first = await new_session(client, "lingerer")
        clean = (await call(client, first, "observe", {}))["result"]["data"]
        left = (await call(client, first, "leave_traces", {"mark": "m1"}))["result"]["data"]
        assert left["tmp"] == ["locked", "m1.txt"] and left["global"] == "m1"
        assert left["threads"] == clean["threads"] + 1 and left["other_processes"] >= 1
        container = await _container(app, first)
        assert (await client.delete(f"/v1/sessions/{first}")).status_code == 200
        await _recycled(app, 1)

        second = await new_session(client, "lingerer", scenario="lingerer-1")
        assert await _container(app, second) == container  # the same container, recycled
        seen = (await call(client, second, "observe", {}))["result"]["data"]
        assert seen["tmp"] == []
        assert seen["global"] is None and seen["class_attribute"] is None
        assert seen["threads"] == clean["threads"]
        assert seen["other_processes"] == 0
        if runtime is None:  # gVisor refuses chmod on host sockets: they were never changed
            assert set(seen["socket_modes"].values()) == {FRESH_SOCKET_MODE}, seen
        # The recycled sandbox serves its new session fully: calls, state, validation.
        await call(client, second, "leave_traces", {"mark": "m"})
        validation = await client.post(f"/v1/sessions/{second}/validate")
        assert validation.status_code == 200, validation.text
        assert validation.json()["reward"] == 1.0, validation.text


async def test_closed_sessions_feed_the_pool_instead_of_new_containers(make_settings) -> None:
    async with running_gateway(make_settings(pool_size=2)) as (app, client):
        for _ in range(6):
            session_id = await new_session(client, "counter_lab")
            assert (await client.delete(f"/v1/sessions/{session_id}")).status_code == 200
            await _recycled(app, app.state.pool.stats().recycled + 1)
        stats = app.state.pool.stats()
        assert stats.recycled == 6
        assert stats.started <= 4, stats  # the warm pool's own, not one per session


async def test_sessions_that_close_together_all_come_back_and_the_idle_surplus_goes(
        make_settings, monkeypatch) -> None:
    async with running_gateway(make_settings(pool_size=1)) as (app, client):
        sessions = [await new_session(client, "counter_lab") for _ in range(4)]
        for session_id in sessions:
            assert (await client.delete(f"/v1/sessions/{session_id}")).status_code == 200
        await _recycled(app, 4)
        assert app.state.pool.stats().ready >= 4  # above the target of 1: all came back
        monkeypatch.setattr(pool_module, "IDLE_SURPLUS_SECONDS", 0.0)
        # the pool's own sweep trims (calling _trim here would race that sweep's probes)
        for _ in range(int(pool_module.SWEEP_INTERVAL * 3 / 0.1)):
            if app.state.pool.stats().live == 1:
                break
            await asyncio.sleep(0.1)
        assert app.state.pool.stats().ready == 1
        assert app.state.pool.stats().live == 1


async def test_a_session_ended_on_another_gateway_recycles_into_that_gateways_pool(
        make_settings) -> None:
    """Workers of one host share sessions: the one that ends a session recycles its container
    into its own pool; the creator's stale hold on it is refused by generation, so it can never
    end the session that container serves next."""
    settings = make_settings(pool_size=1)
    async with running_gateway(settings) as (creator, first), \
            running_gateway(settings) as (closer, second):
        session_id = await new_session(first, "counter_lab")
        await call(first, session_id, "increment", {"name": "a"})
        container = await _container(creator, session_id)
        assert (await second.delete(f"/v1/sessions/{session_id}")).status_code == 200
        await _recycled(closer, 1)

        reused = await new_session(second, "counter_lab")
        assert await _container(closer, reused) == container
        await creator.state.service.sandboxes.forget_stale()  # the creator lets go of its hold
        for _ in range(100):
            if creator.state.pool.stats().live == creator.state.pool.stats().ready:
                break
            await asyncio.sleep(0.05)
        assert creator.state.pool.stats().recycled == 0  # refused: generation moved on
        answer = await call(second, reused, "increment", {"name": "a"})
        assert answer["result"]["data"]["value"] == 1  # the new session, untouched
