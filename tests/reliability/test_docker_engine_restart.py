"""The Docker engine restarted under a running gateway (stopped with SIGTERM, started again the way
scripts/bootstrap starts it): every sandbox dies with it. While it is down /readyz answers 503
naming the sandbox backend and session requests a clear 503; when it is back /readyz answers 200
again and sessions recover by replay, exactly, with no manual step and no container left behind.

This restarts the engine of the whole machine, so it stops every other container too.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import TEST_LABELS
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import LIBRARY, GatewayProcess
from tests.reliability.helpers import (
    assert_error,
    audit_counter,
    audit_trajectory,
    call,
    containers_of,
    docker_answers,
    entries,
    new_session,
    start_dockerd,
    state,
    stop_dockerd,
)


async def readiness(client: httpx.AsyncClient, status: int, within: float) -> httpx.Response:
    deadline = time.monotonic() + scaled(within)
    while True:
        response = await client.get("/readyz")
        if response.status_code == status:
            return response
        assert time.monotonic() < deadline, f"/readyz never answered {status}: {response.text}"
        await asyncio.sleep(0.2)


@pytest.mark.engine_restart
async def test_docker_engine_restart(make_settings, tmp_path) -> None:
    # A container per session, so that what is left behind can be counted in containers.
    settings = make_settings(pool_size=2, call_timeout=3.0, load_timeout=5.0, sandbox_slots=1)
    gateway = GatewayProcess(settings, TEST_LABELS, tmp_path / "gateway.log").start()
    restarted = False
    try:
        async with gateway.client() as client:
            counters = [await new_session(client, scenario="counter-2", seed=k) for k in range(3)]
            acknowledged = {sid: [] for sid in counters}
            for sid in counters:
                for i in range(4):
                    await call(client, sid, "increment", {"name": "z"}, call_id=f"{sid}-{i}")
                    acknowledged[sid].append(f"{sid}-{i}")
            library = await new_session(client, LIBRARY, scenario="library_loans-001", seed=4)
            for step in [("get_member", {"member_id": "M-1001"}),
                         ("search_books", {"query": "the"})]:
                await call(client, library, *step)
            before = {sid: await state(client, sid) for sid in [*counters, library]}

            stop_dockerd()
            try:
                down = await readiness(client, 503, within=10)
                assert down.json()["components"]["sandbox_backend"]["ok"] is False
                assert down.json()["components"]["redis"]["ok"] is True
                started = time.monotonic()
                response = await client.post(
                    f"/v1/sessions/{counters[0]}/calls",
                    json={"name": "increment", "arguments": {"name": "z"}, "call_id": "outage"})
                assert time.monotonic() - started < 30
                assert_error(response, 503, "BackendUnavailable")
                response = await client.post("/v1/sessions", json={"env": "counter_lab"})
                assert_error(response, 503, "BackendUnavailable")
                # What lives in Redis is still served.
                assert (await client.get(f"/v1/sessions/{library}/trajectory")).status_code == 200
                assert (await client.get("/healthz")).status_code == 200
            finally:
                start_dockerd()
                restarted = True

            await readiness(client, 200, within=30)
            for sid, expected in before.items():  # rebuilt by replay, exactly
                assert await state(client, sid) == expected
            answer = await call(client, counters[0], "increment", {"name": "z"}, call_id="outage")
            assert answer["duplicate"] is False  # the call refused during the outage never ran
            acknowledged[counters[0]].append("outage")
            for sid in counters:
                await call(client, sid, "increment", {"name": "z"}, call_id=f"{sid}-after")
                acknowledged[sid].append(f"{sid}-after")
                trajectory = await entries(client, sid)
                audit_trajectory(trajectory, acknowledged[sid])
                assert audit_counter(trajectory, "z", start=10) == 10 + len(acknowledged[sid])
            created = await new_session(client, scenario="counter-1")
            await call(client, created, "increment", {"name": "a"})
            metrics = (await client.get("/metrics")).text
            assert "envscaler_replay_mismatches_total 0.0" in metrics

            # Nothing left behind: the dead containers are gone, the live ones are the sessions',
            # the warm pool's and the checkers' (replaced by their sweep).
            instance = gateway.instances[-1]
            deadline = time.monotonic() + scaled(40)
            while True:
                stopped = containers_of(instance, running=False)
                running = containers_of(instance, running=True)
                ready = (await client.get("/readyz")).json()["pool"]
                if not stopped and len(running) == 5 + ready["ready"] + settings.checkers:
                    break
                assert time.monotonic() < deadline, (len(stopped), len(running), ready)
                await asyncio.sleep(1)
    finally:
        if not restarted and not docker_answers():
            start_dockerd()
        gateway.stop()
        gateway.remove_sandboxes(Path(settings.socket_root))
