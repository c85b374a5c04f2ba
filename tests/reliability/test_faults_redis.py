"""Redis faults: restarted (SIGKILL, append-only persistence on), refusing connections, and hung
(SIGSTOP) for a while. Sessions survive; while Redis is away every session request answers a
clear 503 ``BackendUnavailable`` with ``Retry-After`` within a bounded time; afterwards the
gateway recovers by itself, and no call is lost or executed twice."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis as redis_sync

from envscaler.server.store import COMMIT, LOCK_AND_LOAD, call_ids_key, calls_key, lock_key, session_key
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import (
    LIBRARY,
    kill_sandbox,
    running_gateway,
    sandbox_handle,
)
from tests.reliability.helpers import (
    PrivateRedis,
    RedisProxy,
    assert_error,
    audit_counter,
    audit_trajectory,
    call,
    entries,
    new_session,
    state,
)

ANSWER_WITHIN = 4.0  # seconds: a request to a gateway whose Redis is away never hangs longer


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.resume() if server.process is not None else None
        server.stop()


async def populate(client: httpx.AsyncClient) -> dict[str, list[str]]:
    """Three counter sessions and a library_loans session with calls; call_ids per session."""
    calls: dict[str, list[str]] = {}
    for k in range(3):
        session_id = await new_session(client, scenario="counter-2", seed=k)
        calls[session_id] = []
        for i in range(5):
            await call(client, session_id, "increment", {"name": "z"}, call_id=f"s{k}-{i}")
            calls[session_id].append(f"s{k}-{i}")
    library = await new_session(client, LIBRARY, scenario="library_loans-001", seed=5)
    await call(client, library, "get_member", {"member_id": "M-1001"}, call_id="lib-0")
    calls[library] = ["lib-0"]
    return calls


async def snapshot(client: httpx.AsyncClient, sessions: dict[str, list[str]]) -> dict:
    return {sid: (await state(client, sid), await entries(client, sid)) for sid in sessions}


async def timed(request) -> tuple[httpx.Response, float]:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    response = await request
    return response, time.monotonic() - started


async def assert_unavailable(client: httpx.AsyncClient, session_id: str,
                             within: float = ANSWER_WITHIN) -> None:
    """Every kind of session request answers 503 BackendUnavailable within ``within`` seconds;
    liveness stays."""
    url = f"/v1/sessions/{session_id}"
    requests = [
        lambda: client.post(url + "/calls", json={"name": "increment",
                                                  "arguments": {"name": "z"}, "call_id": "away"}),
        lambda: client.get(url),
        lambda: client.post("/v1/sessions", json={"env": "counter_lab", "scenario": "counter-2"}),
        lambda: client.get(url + "/trajectory"),
        lambda: client.get(url + "/state"),
    ]
    for request in requests:
        response, elapsed = await timed(request())
        assert_error(response, 503, "BackendUnavailable")
        assert "Redis" in response.json()["error"]["message"]
        assert elapsed < scaled(within), elapsed
    ready, elapsed = await timed(client.get("/readyz"))
    assert ready.status_code == 503 and ready.json()["components"]["redis"]["ok"] is False
    assert elapsed < scaled(ANSWER_WITHIN)
    assert (await client.get("/healthz")).status_code == 200


async def wait_ready(client: httpx.AsyncClient, within: float = 15.0) -> None:
    deadline = time.monotonic() + scaled(within)
    while (await client.get("/readyz")).status_code != 200:
        assert time.monotonic() < deadline, "the gateway did not become ready again by itself"
        await asyncio.sleep(0.1)


async def assert_recovered(client: httpx.AsyncClient, sessions: dict[str, list[str]],
                           before: dict) -> None:
    assert await snapshot(client, sessions) == before  # nothing lost, nothing added
    counter = next(iter(sessions))
    # The call attempted while Redis was away ran nowhere that counts: retried, it runs once.
    answer = await call(client, counter, "increment", {"name": "z"}, call_id="away")
    assert answer["duplicate"] is False
    again = await call(client, counter, "increment", {"name": "z"}, call_id="away")
    assert again["duplicate"] is True and again["index"] == answer["index"]
    sessions[counter].append("away")
    for session_id, acknowledged in sessions.items():
        trajectory = await entries(client, session_id)
        audit_trajectory(trajectory, acknowledged)
        if session_id != next(reversed(sessions)):  # the counters
            assert audit_counter(trajectory, "z", start=10) == 10 + len(acknowledged)
    fresh = await new_session(client, scenario="counter-1")
    await call(client, fresh, "increment", {"name": "a"})


async def test_redis_restarted_with_append_only_persistence(make_settings, private_redis) -> None:
    direct = redis_sync.Redis.from_url(private_redis.url, decode_responses=True)
    assert direct.config_get("appendonly") == {"appendonly": "yes"}
    async with running_gateway(make_settings(redis_url=private_redis.url)) as (_, client):
        sessions = await populate(client)
        before = await snapshot(client, sessions)
        keys = sorted(direct.keys("envscaler:*"))
        private_redis.kill()  # SIGKILL: only the append-only file keeps the data
        await assert_unavailable(client, next(iter(sessions)))
        private_redis.start()  # same port, same directory
        assert sorted(direct.keys("envscaler:*")) == keys
        await wait_ready(client)
        await assert_recovered(client, sessions, before)


async def test_redis_hung_then_back(make_settings, private_redis) -> None:
    """SIGSTOP: connections are accepted but nothing answers, as in a network partition. Each
    request waits out ENVSCALER_REDIS_TIMEOUT once (default 3 s; 1 s here), never more."""
    settings = make_settings(redis_url=private_redis.url, redis_timeout=1.0)
    async with running_gateway(settings) as (_, client):
        sessions = await populate(client)
        before = await snapshot(client, sessions)
        private_redis.pause()
        try:
            await assert_unavailable(client, next(iter(sessions)), within=2.5)
        finally:
            private_redis.resume()
        await wait_ready(client)
        await assert_recovered(client, sessions, before)


async def test_a_record_that_vanishes_mid_call_is_never_resurrected(make_settings,
                                                                    redis_client) -> None:
    """A session's keys can vanish while a request holds its lock (they expired while the lock
    was stalled behind a dead gateway, Redis restarted without persistence, an operator deleted
    them). The writes that follow must not recreate a partial record: the session answers 404,
    cleanly, from then on."""
    settings = make_settings()
    socket_root = Path(settings.socket_root)
    async with running_gateway(settings) as (_, client):
        for kill_sandbox_too in (False, True):
            session_id = await new_session(client, scenario="counter-1")
            await call(client, session_id, "increment", {"name": "a"})
            handle = sandbox_handle(redis_client, session_id)
            napping = asyncio.create_task(client.post(
                f"/v1/sessions/{session_id}/calls",
                json={"name": "nap", "arguments": {"seconds": 0.5}}))
            await asyncio.sleep(0.2)
            redis_client.delete(session_key(session_id),
                                calls_key(session_id),
                                call_ids_key(session_id))
            if kill_sandbox_too:  # the call is retried on a rebuilt sandbox, whose handle the
                await asyncio.to_thread(kill_sandbox, handle, socket_root)  # rebuild records
            answer = await napping
            assert answer.status_code in {404, 503}, answer.text
            assert "Traceback" not in answer.text
            assert not redis_client.exists(session_key(session_id))
            for _ in range(2):
                response = await client.post(f"/v1/sessions/{session_id}/calls",
                                             json={"name": "increment", "arguments": {"name": "a"}})
                assert_error(response, 404, "UnknownSession")
                assert_error(await client.get(f"/v1/sessions/{session_id}/state"), 404,
                             "UnknownSession")
            assert not redis_client.exists(session_key(session_id))
            assert not redis_client.exists(calls_key(session_id))


# ---------------------------------------------------------------- lost replies


def sha(script: str) -> bytes:
    """What ``EVALSHA`` sends for a script: the proxy's marker for its commands."""
    return hashlib.sha1(script.encode()).hexdigest().encode()


async def test_a_commit_whose_reply_is_lost_answers_the_calls_result(make_settings, redis_url,
                                                                     redis_client) -> None:
    """Redis applies a call's COMMIT, and its reply is lost: the connection drops (the client
    retries the commit on a new one), or the socket stalls past ENVSCALER_REDIS_TIMEOUT. The call
    is in the trajectory, so it answers its result (not 503 "effects discarded", after which a
    caller without a call_id would run it twice), and it ran once."""
    async with RedisProxy(redis_url) as proxy:
        settings = make_settings(redis_url=proxy.url, redis_timeout=1.0)
        async with running_gateway(settings) as (_, client):
            session_id = await new_session(client, scenario="counter-2")
            await call(client, session_id, "increment", {"name": "z"})  # the scripts are loaded
            for lose in (proxy.drop_reply, proxy.hold_replies):
                lose(sha(COMMIT))
                answer = await call(client, session_id, "increment", {"name": "z"})
                assert answer["ok"] is True and answer["duplicate"] is False, answer
            assert proxy.matched == {"drop": 1, "hold": 1}
            trajectory = await entries(client, session_id)
            audit_trajectory(trajectory)
            assert [e["index"] for e in trajectory] == [0, 1, 2]
            assert audit_counter(trajectory, "z", start=10) == 13
            assert (await state(client, session_id))["counters"]["z"] == 13
            assert (await call(client, session_id, "increment", {"name": "z"}))["index"] == 3


async def test_a_lock_whose_reply_is_lost_is_its_takers(make_settings, redis_url,
                                                        redis_client) -> None:
    """The session lock's SET lands and its reply is lost with the connection: the retry finds
    the lock holding its own token and goes on, instead of waiting out the whole lease (503
    SessionBusy) behind itself. Likewise for the waiting path (redis-py's Lock.acquire)."""
    async with RedisProxy(redis_url) as proxy:
        settings = make_settings(redis_url=proxy.url, redis_timeout=1.0, session_lock_wait=2.0)
        async with running_gateway(settings) as (app, client):
            session_id = await new_session(client, scenario="counter-2")
            await call(client, session_id, "increment", {"name": "z"})
            proxy.drop_reply(sha(LOCK_AND_LOAD))
            answer = await call(client, session_id, "increment", {"name": "z"})
            assert answer["ok"] is True and answer["index"] == 1
            assert proxy.matched["drop"] == 1
            assert not redis_client.exists(lock_key(session_id))

            store = app.state.service.store
            lock = store.lock(session_id, lease=30.0, wait=1.0)
            redis_client.set(lock.name, "mine", px=30_000)  # as if our SET landed, reply lost
            assert await lock.acquire(blocking_timeout=0.5, token="mine")
            await lock.release()
            assert (await call(client, session_id, "increment", {"name": "z"}))["index"] == 2


async def test_a_stalled_command_fails_alone(make_settings, redis_url, redis_client) -> None:
    """One session's command whose reply stalls (a slow reply, a socket that hangs) times out
    after ENVSCALER_REDIS_TIMEOUT and that request answers 503; meanwhile other sessions' calls,
    sent after it, keep being answered: no command shares its connection, so none waits behind
    its reply or fails with its timeout."""
    async with RedisProxy(redis_url) as proxy:
        settings = make_settings(redis_url=proxy.url, redis_timeout=1.0)
        async with running_gateway(settings) as (_, client):
            stalled, other = [await new_session(client, scenario="counter-2") for _ in range(2)]
            for session_id in (stalled, other):
                await call(client, session_id, "increment", {"name": "z"})
            proxy.hold_replies(stalled.encode())
            slow = asyncio.create_task(client.post(
                f"/v1/sessions/{stalled}/calls",
                json={"name": "increment", "arguments": {"name": "z"}, "call_id": "slow"}))
            while not proxy.matched["hold"]:
                await asyncio.sleep(0.005)
            answered = 0
            while not slow.done():
                await call(client, other, "increment", {"name": "z"})
                answered += 1
            assert_error(await slow, 503, "BackendUnavailable")
            assert answered >= 2, answered
            trajectory = await entries(client, other)
            assert audit_counter(trajectory, "z", start=10) == 10 + 1 + answered
            retried = await call(client, stalled, "increment", {"name": "z"}, call_id="slow")
            assert retried["index"] == 1 and retried["duplicate"] is False
