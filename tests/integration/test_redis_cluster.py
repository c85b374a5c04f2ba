"""The service on a Redis Cluster of three masters (on loopback), for real: every key of a
session in one hash slot, sessions spread over the masters, the whole session API working
(scripts, locks, the sharded live set, expiry of idle sessions), and sandbox hosts registering
and being placed on through it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_sync
from redis.cluster import RedisCluster

from envscaler.sandbox.config import ClusterAuth
from envscaler.sandbox.sandbox import Sandbox
from envscaler.server.settings import Settings
from envscaler.server.store import LIVE_KEYS, call_ids_key, calls_key, live_key, lock_key, session_key
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import COUNTER, running_gateway
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.hosts_fixtures import SECRET, host_in_process
from tests.integration.redis_cluster import LocalRedisCluster
from tests.integration.test_sandbox_hosts import load_counter, started

SESSIONS = 12


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalRedisCluster]:
    with LocalRedisCluster(tmp_path / "cluster") as running:
        yield running


async def test_sessions_on_a_redis_cluster(cluster: LocalRedisCluster, catalogue_root: Path,
                                           socket_root: Path) -> None:
    settings = Settings(redis_url=cluster.url, catalogue=catalogue_root,
                        sandbox_backend="process", socket_root=socket_root, pool_size=1,
                        max_sandboxes=32, api_keys=[], log_level="WARNING", session_ttl=600)
    async with running_gateway(settings) as (app, client):
        ids = [(await client.post("/v1/sessions", json={
            "env": COUNTER, "scenario": "counter-1", "seed": n})).json()["session_id"]
            for n in range(SESSIONS)]
        for sid in ids:
            for arguments in ({"name": "a", "by": 2}, {"name": "b"}):
                reply = await client.post(f"/v1/sessions/{sid}/calls", json={
                    "name": "increment", "arguments": arguments, "call_id": f"{sid}-{arguments}"})
                assert reply.status_code == 200, reply.text
            assert (await client.post(f"/v1/sessions/{sid}/validate")).json()["reward"] == 1.0
        reset = await client.post(f"/v1/sessions/{ids[0]}/reset", json={})
        assert reset.status_code == 200, reset.text
        assert (await client.get("/readyz")).status_code == 200
        direct = RedisCluster.from_url(cluster.url.replace("+cluster", ""),
                                       decode_responses=True)
        try:
            for sid in ids:
                keys = [session_key(sid), calls_key(sid), call_ids_key(sid), lock_key(sid),
                        live_key(sid)]
                assert len({direct.keyslot(key) for key in keys}) == 1
                assert direct.zscore(live_key(sid), sid) is not None
            assert sum(direct.zcard(key) for key in LIVE_KEYS) == SESSIONS
            masters = {cluster.master_of(session_key(sid)) for sid in ids}
            assert len(masters) >= 2  # spread over the masters, not all in one slot
            assert (await client.get("/metrics")).text.count(
                f"envscaler_sessions_live {float(SESSIONS)}") == 1
            # idle sessions (their last activity long ago) expire from every shard of the live set
            for sid in ids:
                direct.zadd(live_key(sid), {sid: 1.0})
            assert await app.state.service.expire_idle() == SESSIONS
            assert sum(direct.zcard(key) for key in LIVE_KEYS) == 0
            statuses = {(await client.get(f"/v1/sessions/{sid}")).json()["status"]
                        for sid in ids}
            assert statuses == {"expired"}
        finally:
            direct.close()


async def test_hosts_register_on_a_redis_cluster(cluster: LocalRedisCluster) -> None:
    auth = ClusterAuth(SECRET.encode())
    async with host_in_process(cluster.url, "rc", auth) as host:
        backend = await started(cluster.url, auth)
        try:
            handle = await backend.create({"envscaler.session": "rc1"})
            assert handle.instance == host.id
            sandbox = Sandbox(handle, backend)
            await load_counter(sandbox)
            assert (await sandbox.call("increment", {"name": "r"}, timeout=scaled(5)))["data"][
                "value"] == 1
            await sandbox.destroy()
        finally:
            await backend.close()
    assert redis_sync.Redis(port=cluster.ports[0]).ping()
