"""A node that dies loses nothing: sessions spread over two `envscaler sandbox host` processes
(each with its own socket root, reached only over TCP) by a gateway of the remote backend; one
host is killed mid-episode, and every session it held is rebuilt on the other by replay at its
next request: every call recorded once and in order, results identical, reward 1.0."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis as redis_sync

from envscaler.server.settings import Settings
from envscaler.server.store import session_key
from tests.integration.gateway_fixtures import COUNTER, own_redis_db, running_gateway
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.hosts_fixtures import SECRET, HostProcess

SESSIONS = 8


@pytest.fixture
def cluster_redis(redis_url: str) -> str:
    return own_redis_db(redis_url, 12)


@pytest.fixture
def hosts(cluster_redis: str, tmp_path: Path) -> Iterator[list[HostProcess]]:
    started: list[HostProcess] = []
    try:
        for name in ("n1", "n2"):
            started.append(HostProcess(cluster_redis, name, tmp_path / f"{name}.log").start())
        yield started
    finally:
        for host in started:
            host.stop()


def remote_settings(redis_url: str, catalogue: Path, tmp_path: Path) -> Settings:
    return Settings(redis_url=redis_url, catalogue=catalogue, sandbox_backend="remote",
                    cluster_secret=SECRET, socket_root=tmp_path / "unused", api_keys=[],
                    log_level="WARNING")


def holder(redis_url: str, session_id: str) -> str:
    """The host a session's record names (its sandbox handle's instance)."""
    client = redis_sync.Redis.from_url(redis_url, decode_responses=True)
    try:
        return json.loads(client.hget(session_key(session_id), "sandbox"))["instance"]
    finally:
        client.close()


async def call(client: httpx.AsyncClient, session_id: str, tool: str, **arguments: object
               ) -> dict:
    response = await client.post(f"/v1/sessions/{session_id}/calls",
                                 json={"name": tool, "arguments": arguments})
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_killed_host_loses_no_session(cluster_redis: str, catalogue_root: Path,
                                              hosts: list[HostProcess], tmp_path: Path) -> None:
    settings = remote_settings(cluster_redis, catalogue_root, tmp_path)
    async with running_gateway(settings) as (app, client):
        created = [await client.post("/v1/sessions", json={"env": COUNTER,
                                                           "scenario": "counter-1", "seed": n})
                   for n in range(SESSIONS)]
        ids = [response.json()["session_id"] for response in created]
        first = await asyncio.gather(*(call(client, sid, "increment", name="a", by=2)
                                       for sid in ids))
        tokens = await asyncio.gather(*(call(client, sid, "token") for sid in ids))
        victim = hosts[0]
        on_victim = [sid for sid in ids if holder(cluster_redis, sid) == victim.id]
        assert 0 < len(on_victim) < SESSIONS  # placement spread them over both hosts

        victim.kill()
        second = await asyncio.gather(*(call(client, sid, "increment", name="b") for sid in ids))
        assert {holder(cluster_redis, sid) for sid in ids} == {hosts[1].id}

        for sid, one, token, two in zip(ids, first, tokens, second, strict=True):
            assert one["result"]["data"]["value"] == 3 and two["result"]["data"]["value"] == 1
            entries = (await client.get(f"/v1/sessions/{sid}/trajectory")).json()["entries"]
            assert [(e["index"], e["name"]) for e in entries] == [
                (0, "increment"), (1, "token"), (2, "increment")]
            state = (await client.get(f"/v1/sessions/{sid}/state")).json()["state"]
            # the rebuilt sandbox drew the same token: the replay's results are the recorded ones
            assert state["history"][1] == "token:" + token["result"]["data"]["uuid"]
            validation = (await client.post(f"/v1/sessions/{sid}/validate")).json()
            assert validation["reward"] == 1.0, validation
        metrics = app.state.metrics
        assert metrics.session_rebuilds._value.get() == len(on_victim)
        assert metrics.replay_mismatches._value.get() == 0
        for sid in ids:
            assert (await client.delete(f"/v1/sessions/{sid}")).status_code in (200, 204)


async def test_a_host_cut_off_mid_call_loses_no_session(cluster_redis: str, catalogue_root: Path,
                                                        hosts: list[HostProcess],
                                                        tmp_path: Path) -> None:
    """A host that stops answering without closing its connections (stopped, as when its node
    is cut off): the call in flight to it fails over once its heartbeats stop, and the session
    is rebuilt on the other host; the call is recorded once."""
    settings = remote_settings(cluster_redis, catalogue_root, tmp_path)
    async with running_gateway(settings) as (_app, client):
        ids = [(await client.post("/v1/sessions", json={"env": COUNTER})).json()["session_id"]
               for _ in range(4)]
        for sid in ids:
            await call(client, sid, "increment", name="c")
        victim = next(host for host in hosts if host.id == holder(cluster_redis, ids[0]))
        assert victim.process is not None
        victim.process.send_signal(signal.SIGSTOP)
        try:
            reply = await call(client, ids[0], "increment", name="c")
        finally:
            victim.process.send_signal(signal.SIGCONT)
        assert reply["result"]["data"] == {"name": "c", "before": 1, "value": 2}
        assert holder(cluster_redis, ids[0]) != victim.id
        entries = (await client.get(f"/v1/sessions/{ids[0]}/trajectory")).json()["entries"]
        assert [(e["index"], e["name"], e["ok"]) for e in entries] == [
            (0, "increment", True), (1, "increment", True)]
