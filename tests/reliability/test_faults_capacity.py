"""Capacity and sandbox-creation faults: the warm pool drained by a burst, every sandbox slot
taken, a missing sandbox image, an unwritable socket root. Each answers a clear 429/503 with
``Retry-After`` and never a hang or a 500; the service stays up and recovers by itself once the
cause is gone."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest

from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.pool import QUEUE_WAIT_FACTOR
from tests.conftest import RUN_ID
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import running_gateway
from tests.reliability.helpers import assert_error, call, containers_of, new_session

# An open waits at most QUEUE_WAIT_FACTOR start timeouts for a creation slot, then its creation
# may take one more: past that it would hang. (The bound the pool promises, whatever the load.)
ANSWER_WITHIN = (QUEUE_WAIT_FACTOR + 1) * SandboxConfig().start_timeout


async def create(client: httpx.AsyncClient) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = await client.post("/v1/sessions", json={"env": "counter_lab",
                                                      "scenario": "counter-1"})
    return response, time.monotonic() - started


async def pool_ready(client: httpx.AsyncClient, level: int, within: float = 20.0) -> None:
    deadline = time.monotonic() + scaled(within)
    while (await client.get("/readyz")).json()["pool"]["ready"] < level:
        assert time.monotonic() < deadline, f"the warm pool never reached {level}"
        await asyncio.sleep(0.1)


async def wait_ready(client: httpx.AsyncClient, within: float = 20.0) -> None:
    deadline = time.monotonic() + scaled(within)
    while (response := await client.get("/readyz")).status_code != 200:
        assert time.monotonic() < deadline, f"never ready again: {response.text}"
        await asyncio.sleep(0.2)


async def test_warm_pool_drained_by_a_burst_then_every_slot_taken(make_settings) -> None:
    settings = make_settings(pool_size=2, sandbox_create_concurrency=1, max_sandboxes=8)
    async with running_gateway(settings) as (_, client):
        await pool_ready(client, 2)
        # A burst of 6 against 2 warm sandboxes and one creation at a time: the other four wait
        # their turn at the engine, none is refused for a rate.
        answers = await asyncio.gather(*(create(client) for _ in range(6)))
        assert [r.status_code for r, _ in answers] == [201] * 6, [r.text for r, _ in answers]
        created = [r.json()["session_id"] for r, _ in answers]
        for response, elapsed in answers:
            assert elapsed < scaled(ANSWER_WITHIN), elapsed  # never a hang
        assert (await client.get("/readyz")).status_code == 200

        # Every slot taken (sessions, and a warm sandbox on its way to the pool): 429 until a
        # session goes.
        while True:
            response, elapsed = await create(client)
            assert elapsed < scaled(ANSWER_WITHIN)
            if response.status_code == 201:
                created.append(response.json()["session_id"])
                continue
            assert_error(response, 429, "CapacityExhausted")
            break
        assert len(created) in (7, 8)  # 8 slots; the refill may hold the last one for a moment
        for session_id in created[:2]:
            assert (await client.delete(f"/v1/sessions/{session_id}")).status_code == 200
        await asyncio.sleep(1.0)
        response, _ = await create(client)
        assert response.status_code == 201, response.text
        await call(client, response.json()["session_id"], "increment", {"name": "a"})
        for session_id in created[2:]:  # the survivors were never disturbed
            await call(client, session_id, "increment", {"name": "a"})


async def test_missing_sandbox_image_then_built(make_settings, sandbox_image: str) -> None:
    missing = f"envscaler-missing:{RUN_ID}"
    engine = docker.from_env()
    settings = make_settings(sandbox_image=missing, pool_size=1)
    try:
        async with running_gateway(settings) as (_, client):
            assert (await client.get("/healthz")).status_code == 200
            ready = await client.get("/readyz")
            assert ready.status_code == 503, ready.text
            assert missing in ready.json()["components"]["sandbox_backend"]["error"]
            response, elapsed = await create(client)
            assert elapsed < scaled(ANSWER_WITHIN)
            error = assert_error(response, 503, "BackendUnavailable")
            assert missing in error["message"] or "No such image" in error["message"], error
            assert (await client.get("/v1/envs")).status_code == 200  # the rest still serves
            assert containers_of(settings.instance) == []  # nothing half-made was left

            engine.images.get(sandbox_image).tag(missing)  # the operator builds the image
            await wait_ready(client)
            session_id = await new_session(client, scenario="counter-1")
            await call(client, session_id, "increment", {"name": "a"})
    finally:
        try:
            engine.images.remove(missing)  # only the tag: the image keeps its own
        except docker.errors.ImageNotFound:
            pass


@pytest.fixture
def own_socket_root() -> Iterator[Path]:
    root = Path(f"/tmp/esxro-{RUN_ID}")  # short: Unix socket paths are limited to 107 bytes
    root.mkdir(mode=0o700, exist_ok=True)
    try:
        yield root
    finally:
        for path in [root, *root.iterdir()]:
            subprocess.run(["chattr", "-i", str(path)], check=False)
        shutil.rmtree(root, ignore_errors=True)


async def test_unwritable_socket_root_then_writable_again(make_settings,
                                                          own_socket_root: Path) -> None:
    # a container per session: the warm one is used up by the second open
    settings = make_settings(socket_root=own_socket_root, pool_size=1, sandbox_slots=1)
    async with running_gateway(settings) as (_, client):
        survivor = await new_session(client, scenario="counter-1")
        await pool_ready(client, 1)
        directory = own_socket_root / settings.instance
        # immutable: even root (this suite) cannot create anything in it
        await asyncio.to_thread(subprocess.run, ["chattr", "+i", str(directory)], check=True)
        try:
            ready = await client.get("/readyz")
            assert ready.status_code == 503, ready.text
            assert "not writable" in ready.json()["components"]["sandbox_backend"]["error"]
            # the warm sandbox is used up first; then creation fails, clearly
            for _ in range(3):
                response, elapsed = await create(client)
                assert elapsed < scaled(ANSWER_WITHIN)
                if response.status_code != 201:
                    break
            error = assert_error(response, 503, "BackendUnavailable")
            assert "socket directory" in error["message"], error
            await call(client, survivor, "increment", {"name": "a"})  # live sessions go on
        finally:
            await asyncio.to_thread(subprocess.run, ["chattr", "-i", str(directory)], check=True)
        await wait_ready(client)
        session_id = await new_session(client, scenario="counter-1")
        await call(client, session_id, "increment", {"name": "a"})


async def test_a_session_in_use_is_not_expired_while_its_sandbox_cannot_be_rebuilt(
    make_settings, sandbox_image: str, redis_client
) -> None:
    """Its container is killed while no sandbox can be created (the image was removed): every
    call answers 503 for longer than the idle TTL. A client that keeps trying keeps the session:
    it is not expired as idle under it, and goes on where it was once sandboxes can be made."""
    from tests.integration.gateway_fixtures import kill_sandbox, sandbox_handle

    flaky = f"envscaler-flaky:{RUN_ID}"
    engine = docker.from_env()
    engine.images.get(sandbox_image).tag(flaky)
    settings = make_settings(sandbox_image=flaky, pool_size=0, session_ttl=1.0, record_ttl=2.0,
                             sandbox_slots=1)  # a container per session: no spare slot in it
    try:
        async with running_gateway(settings) as (_, client):
            session_id = await new_session(client, scenario="counter-1")
            await call(client, session_id, "increment", {"name": "a"}, call_id="c0")
            engine.images.remove(flaky)  # only the tag
            await asyncio.to_thread(kill_sandbox, sandbox_handle(redis_client, session_id),
                                    Path(settings.socket_root))
            until = time.monotonic() + scaled(4.0)  # the idle TTL, four times over
            while time.monotonic() < until:
                response = await client.post(f"/v1/sessions/{session_id}/calls", json={
                    "name": "increment", "arguments": {"name": "a"}, "call_id": "c1"})
                assert_error(response, 503, "BackendUnavailable")
                await asyncio.sleep(0.3)
            engine.images.get(sandbox_image).tag(flaky)
            answer = await call(client, session_id, "increment", {"name": "a"}, call_id="c1")
            assert answer["result"]["data"] == {"name": "a", "before": 2, "value": 3}
            assert (await client.get(f"/v1/sessions/{session_id}")).json()["status"] == "active"
    finally:
        try:
            engine.images.remove(flaky)
        except docker.errors.ImageNotFound:
            pass
