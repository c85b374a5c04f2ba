"""Environments whose state is a database (issue 20), through a real gateway: a scenario built on
a shared data file with its merge patch on top, solved to reward 1.0; nothing of the database in
Redis; a start too large for the sandbox refused at open, naming the limit, before any sandbox
is claimed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from envscaler.bench import largestate
from envscaler.server import statesize
from envscaler.server.settings import Settings
from envscaler.server.store import session_key
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import running_gateway

SIZE_MB = 0.2


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shop") / "envs"
    largestate.write_catalogue(root, (SIZE_MB,))
    return root


async def test_a_scenario_over_a_data_file_is_served_and_solved(make_settings, redis_client,
                                                                 shop) -> None:
    scenario = largestate.scenario_id(SIZE_MB)
    async with running_gateway(make_settings(catalogue=shop)) as (_, client):
        opened = await client.post("/v1/sessions", json={"env": largestate.ENV_ID,
                                                          "scenario": scenario})
        assert opened.status_code == 201, opened.text
        session_id = opened.json()["session_id"]
        # the patch is applied on top of the data file
        order = await client.post(f"/v1/sessions/{session_id}/calls", json={
            "name": "get_order", "arguments": {"order_id": "O-0000002"}})
        assert order.json()["result"]["data"]["shipping_address"] == "2 Old Road, Leeds LS1"
        for step in largestate.SOLUTION:
            answer = await client.post(f"/v1/sessions/{session_id}/calls", json=step)
            assert answer.json()["ok"], answer.text
        validation = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert validation["reward"] == 1.0, validation
        key = session_key(session_id)
        stored = sum(redis_client.memory_usage(k) or 0 for k in redis_client.keys(f"{key}*"))
        database = (shop / largestate.ENV_ID / "data" / largestate.data_file(SIZE_MB)).stat()
        assert stored < database.st_size / 10, stored  # the trajectory, not the database


async def test_a_start_past_the_state_limit_is_refused_at_open(make_settings, shop) -> None:
    settings = make_settings(catalogue=shop, max_state_bytes=100_000)
    async with running_gateway(settings) as (_, client):
        before = await _pool(client)
        refused = await client.post("/v1/sessions", json={
            "env": largestate.ENV_ID, "scenario": largestate.scenario_id(SIZE_MB)})
        assert refused.status_code == 413, refused.text
        error = refused.json()["error"]
        assert error["type"] == "StateTooLarge" and "ENVSCALER_MAX_STATE_BYTES" in error["message"]
        custom = await client.post("/v1/sessions", json={
            "env": largestate.ENV_ID, "init_config": {"orders": {"x": "y" * 200_000}}})
        assert custom.status_code == 413 and custom.json()["error"]["field"] == "init_config"
        assert await _pool(client) == before  # no sandbox was claimed


async def _pool(client) -> dict:  # type: ignore[no-untyped-def]
    """The warm pool's figures, once it is full (a claim would take one of its sandboxes)."""
    for _ in range(600):
        pool = (await client.get("/readyz")).json()["pool"]
        if pool["ready"] >= pool["target"]:
            return pool
        await asyncio.sleep(0.1)
    raise AssertionError(f"the pool never filled: {pool}")


def test_the_state_limit_follows_the_sandbox_memory() -> None:
    limit = statesize.state_limit(Settings(sandbox_memory="64m", api_keys=[]))
    assert limit.max_bytes == (64 << 20) // statesize.SANDBOX_BYTES_PER_STATE_BYTE
    assert "ENVSCALER_SANDBOX_MEMORY=64m" in limit.because
    default = statesize.state_limit(Settings(api_keys=[]))
    assert default.max_bytes == Settings(api_keys=[]).max_state_bytes


def test_budgets_grow_with_the_state() -> None:
    settings = Settings(api_keys=[])
    small = statesize.check_budget(settings, "{}", "{}")
    large = statesize.check_budget(settings, "x" * 10_000_000, "x" * 10_000_000)
    assert large.cpu_seconds > small.cpu_seconds and large.memory_bytes > small.memory_bytes
    assert statesize.read_timeout(settings, 30_000_000) > settings.call_timeout
    assert statesize.load_timeout(settings, 30_000_000) > settings.load_timeout
