"""`envscaler.server.redis_scripts.ScriptClient`, the lean client of a tool call's two scripts, against a real
redis-server: the same replies and errors as redis-py, many commands in flight on its one
connection, scripts re-sent after Redis forgets them, timeouts and reconnection."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from envscaler.server.embedded_redis import EmbeddedRedis
from envscaler.server.redis_scripts import ScriptClient
from tests.deadlines import scaled

pytestmark = pytest.mark.redis

ECHO = "return {KEYS[1], ARGV[1], ARGV[2], redis.call('GET', KEYS[1])}"
PAIR = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return false end
return {redis.call('HGETALL', KEYS[2]), redis.call('HGET', KEYS[2], ARGV[2])}
"""


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def test_replies_match_redis_py(redis_url: str, redis_client: aioredis.Redis) -> None:
    fast = ScriptClient.for_url(redis_url, timeout=scaled(3), connect_timeout=3)
    assert fast is not None
    await redis_client.delete("rs:lock", "rs:hash")
    await redis_client.hset("rs:hash", mapping={"a": "1", "é": "ü"})
    await redis_client.set("rs:str", "välue")
    echo, pair = redis_client.register_script(ECHO), redis_client.register_script(PAIR)
    try:
        args = [b"token", 42]
        assert await fast.evalsha(echo, ["rs:str"], args) == \
            await echo(keys=["rs:str"], args=args) == ["rs:str", "token", "42", "välue"]
        first = await fast.evalsha(pair, ["rs:lock", "rs:hash"], ["t", "é"])
        assert first == [["a", "1", "é", "ü"], "ü"]
        assert await fast.evalsha(pair, ["rs:lock", "rs:hash"], ["t", "é"]) is None  # taken
        with pytest.raises(ResponseError):
            await fast.evalsha(redis_client.register_script("return redis.call('NOPE')"), [], [])
    finally:
        fast.close()


async def test_many_commands_in_flight_keep_their_replies(redis_url: str) -> None:
    fast = ScriptClient.for_url(redis_url, timeout=scaled(3), connect_timeout=3)
    assert fast is not None
    script = aioredis.Redis().register_script("return ARGV[1]")
    try:
        replies = await asyncio.gather(*(fast.evalsha(script, [], [str(i)]) for i in range(500)))
        assert replies == [str(i) for i in range(500)]
    finally:
        fast.close()


async def test_a_forgotten_script_is_sent_again(redis_url: str,
                                                redis_client: aioredis.Redis) -> None:
    fast = ScriptClient.for_url(redis_url, timeout=scaled(3), connect_timeout=3)
    assert fast is not None
    script = redis_client.register_script("return 'fresh-' .. ARGV[1]")
    try:
        await redis_client.script_flush()
        assert await fast.evalsha(script, [], ["x"]) == "fresh-x"
        assert await redis_client.script_exists(script.sha) == [True]
    finally:
        fast.close()


async def test_timeout_then_reconnect_after_restart(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "r", persistent=False).start()
    fast = ScriptClient.for_url(server.url, timeout=0.5, connect_timeout=0.5)
    assert fast is not None
    script = aioredis.Redis().register_script("return 1")
    try:
        assert await fast.evalsha(script, [], []) == 1
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)  # hung: no reply
        try:
            with pytest.raises(RedisTimeoutError):
                await fast.evalsha(script, [], [])
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        assert await fast.evalsha(script, [], []) == 1  # a new connection
        port = server.port
        server.stop()
        with pytest.raises(RedisConnectionError):
            await fast.evalsha(script, [], [])
        server = EmbeddedRedis(tmp_path / "r", port=port, persistent=False).start()  # same password
        assert await fast.evalsha(script, [], []) == 1  # reconnected, script loaded again
    finally:
        fast.close()
        server.stop()


async def test_commands_in_flight_on_a_hung_redis_time_out(tmp_path: Path) -> None:
    """Each command in flight has a connection of its own, whose timer drops it when the
    command passes its deadline: each fails within about ``timeout`` of being sent."""
    server = EmbeddedRedis(tmp_path / "r", persistent=False).start()
    fast = ScriptClient.for_url(server.url, timeout=0.4, connect_timeout=0.5)
    assert fast is not None
    script = aioredis.Redis().register_script("return 1")
    loop = asyncio.get_running_loop()
    try:
        assert await fast.evalsha(script, [], []) == 1
        for _ in range(3):  # an idle connection's timer never drops it
            await asyncio.sleep(0.2)
            assert await fast.evalsha(script, [], []) == 1
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            started = loop.time()
            first = asyncio.ensure_future(fast.evalsha(script, [], []))
            await asyncio.sleep(0.2)
            later = [asyncio.ensure_future(fast.evalsha(script, [], [])) for _ in range(5)]
            results = await asyncio.gather(first, *later, return_exceptions=True)
            elapsed = loop.time() - started
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        assert all(isinstance(r, RedisTimeoutError) for r in results), results
        assert 0.35 <= elapsed < 1.5, elapsed  # the last command's deadline ended it
        assert await fast.evalsha(script, [], []) == 1  # a new connection
    finally:
        fast.close()
        server.stop()


def test_commands_are_encoded_as_before() -> None:
    from envscaler.server.redis_scripts import _encode, _encode_any

    for args in (
        ["EVALSHA", "a" * 40, 2, "k1", "k2", b"token", 25000, "", "é", repr(1.5), 2**70, -3],
        ["SET", "k", 0.1 + 0.2, 1e-7, float("inf"), True, bytearray(b"b")],  # _encode_any's
    ):
        assert _encode(args) == _encode_any(args)


async def test_url_options(tmp_path: Path) -> None:
    assert ScriptClient.for_url("rediss://example:6380/0", 1, 1) is None  # TLS: redis-py's
    server = EmbeddedRedis(tmp_path / "r", persistent=False).start()
    try:
        url = f"redis://:{server.password}@127.0.0.1:{server.port}/3"
        fast = ScriptClient.for_url(url, timeout=scaled(3), connect_timeout=3)
        assert fast is not None
        check = aioredis.Redis.from_url(url, decode_responses=True)
        await check.set("in-db-3", "yes")
        script = check.register_script("return redis.call('GET', KEYS[1])")
        try:
            assert await fast.evalsha(script, ["in-db-3"], []) == "yes"
        finally:
            fast.close()
            await check.aclose()
        wrong = ScriptClient.for_url(f"redis://:nope@127.0.0.1:{server.port}/0", 3, 3)
        assert wrong is not None
        with pytest.raises(ResponseError):
            await wrong.evalsha(script, ["in-db-3"], [])
        wrong.close()
    finally:
        server.stop()
