"""The embedded Redis of `envscaler serve`: a password of its own (kept in its directory, mode
0600, off every command line), loopback only, ``maxmemory`` with ``noeviction``; and a gateway
whose Redis is full answers a clear 503 for what would write, keeps serving reads, evicts nothing,
and goes on where it was once Redis has room again.
"""

from __future__ import annotations

import asyncio
import re
import signal
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from envscaler.server.embedded_redis import PASSWORD_NAME, EmbeddedRedis, EmbeddedRedisError, free_port
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import running_gateway
from tests.integration.serve_helpers import serve, serve_env, wait_for
from tests.reliability.helpers import assert_error, call, entries, new_session

MAXMEMORY = 16 << 20


def unauthenticated(server: EmbeddedRedis) -> redis.Redis:
    return redis.Redis(port=server.port, socket_timeout=5)


def test_the_embedded_redis_keeps_its_password_to_itself(tmp_path: Path) -> None:
    directory = tmp_path / "redis"
    with EmbeddedRedis(directory, persistent=True, maxmemory=MAXMEMORY) as server:
        with pytest.raises(redis.AuthenticationError):
            unauthenticated(server).ping()
        with redis.Redis.from_url(server.url, decode_responses=True) as client:
            client.set("kept", "yes")
            assert client.config_get("bind")["bind"] == "127.0.0.1"
            assert client.config_get("maxmemory")["maxmemory"] == str(MAXMEMORY)
            assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
        assert server.process is not None
        assert server.password not in Path(f"/proc/{server.process.pid}/cmdline").read_text()
        password_file = directory / PASSWORD_NAME
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert password_file.read_text().strip() == server.password
        first_password = server.password
    with EmbeddedRedis(directory, persistent=True) as again:  # a gateway restarted on it
        assert again.password == first_password
        with redis.Redis.from_url(again.url, decode_responses=True) as client:
            assert client.get("kept") == "yes"


def test_a_password_file_others_may_read_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "redis"
    EmbeddedRedis(directory, persistent=False).start().stop()
    (directory / PASSWORD_NAME).chmod(0o644)
    with pytest.raises(EmbeddedRedisError, match="readable by it alone"):
        EmbeddedRedis(directory, persistent=False).start()
    (directory / PASSWORD_NAME).unlink()
    with EmbeddedRedis(directory, persistent=False) as fresh:  # and the lock was let go
        assert redis.Redis.from_url(fresh.url).ping()


def test_serve_gives_its_redis_the_maxmemory_setting(tmp_path: Path, socket_root: Path,
                                                     catalogue_root: Path) -> None:
    state_dir = tmp_path / "state"
    env = serve_env(socket_root / "maxmemory", catalogue=str(catalogue_root),
                    state_dir=str(state_dir), redis_maxmemory="32m")
    env.pop("ENVSCALER_REDIS_URL", None)
    log = tmp_path / "serve.log"
    gateway = serve(free_port(), env, log, workers=1)
    try:
        found = wait_for(lambda: re.search(r"embedded Redis at 127\.0\.0\.1:(\d+)",
                                           log.read_text()), 60, "the embedded Redis")
        assert "redis://" not in log.read_text()  # never its URL: it carries the password
        password = (state_dir / "redis" / PASSWORD_NAME).read_text().strip()
        with redis.Redis(port=int(found[1]), password=password, decode_responses=True) as client:
            assert client.config_get("maxmemory")["maxmemory"] == str(32 << 20)
            assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    finally:
        gateway.send_signal(signal.SIGTERM)  # its Redis goes with it: test_serve_lifetime.py
        gateway.wait(scaled(30))


def fill_up(client: redis.Redis) -> None:
    """Make Redis full: its data over its maxmemory, as when sessions fill it, by a margin that
    its clients' buffers (which come and go) cannot make up."""
    client.config_set("maxmemory", int(client.info("memory")["used_memory"]) // 2)


def assert_full(response: httpx.Response) -> None:
    error = assert_error(response, 503, "BackendUnavailable")  # with Retry-After
    assert error["message"].startswith("Redis is full"), error


async def test_a_full_redis_refuses_writes_clearly_and_evicts_nothing(
        tmp_path: Path, make_settings: Any) -> None:
    with EmbeddedRedis(tmp_path / "redis", persistent=False, maxmemory=MAXMEMORY) as server, \
            redis.Redis.from_url(server.url) as admin:
        async with running_gateway(make_settings(redis_url=server.url)) as (_app, client):
            session = await new_session(client, scenario="counter-1")
            first = (await call(client, session, "increment", {"name": "a"}))["result"]["data"]
            keys = admin.dbsize()
            fill_up(admin)

            url = f"/v1/sessions/{session}"
            assert_full(await client.post("/v1/sessions", json={"env": "counter_lab"}))
            for refused in [
                client.post(url + "/calls", json={"name": "increment", "arguments": {"name": "a"}}),
                client.post(url + "/reset", json={"scenario": "counter-1"}),
                client.post(url + "/validate"),
                client.delete(url),
                client.get(url + "/state"),  # it takes the session's lock: a write
            ]:
                assert_full(await refused)
            read = await client.get(url)
            assert read.status_code == 200, read.text  # the record and trajectory stay readable
            assert len(await entries(client, session)) == 1
            assert admin.dbsize() == keys  # nothing evicted to make room

            admin.config_set("maxmemory", MAXMEMORY)  # room again
            second = await call(client, session, "increment", {"name": "a"})
            assert second["result"]["data"] == {"name": "a", "before": first["value"],
                                                "value": first["value"] + 1}
            assert [e["result"]["data"]["value"] for e in await entries(client, session)] == [
                first["value"], first["value"] + 1]
            await new_session(client)


async def test_a_call_that_redis_fills_up_under_is_discarded_clearly(
        tmp_path: Path, make_settings: Any) -> None:
    """Redis fills up while a call runs: its result cannot be recorded, so its effects are
    discarded (the sandbox is rebuilt from the trajectory), and the answer says why."""
    with EmbeddedRedis(tmp_path / "redis", persistent=False, maxmemory=MAXMEMORY) as server, \
            redis.Redis.from_url(server.url) as admin:
        async with running_gateway(make_settings(redis_url=server.url)) as (_app, client):
            session = await new_session(client, scenario="counter-1")
            first = (await call(client, session, "increment", {"name": "a"}))["result"]["data"]
            napping = asyncio.create_task(client.post(
                f"/v1/sessions/{session}/calls", json={"name": "nap", "arguments": {"seconds": 1}}))
            await asyncio.sleep(0.5)  # the call holds the lock and runs
            fill_up(admin)
            assert_full(await napping)
            admin.config_set("maxmemory", MAXMEMORY)
            second = await call(client, session, "increment", {"name": "a"})
            assert second["result"]["data"]["before"] == first["value"]
            assert [e["name"] for e in await entries(client, session)] == ["increment"] * 2
