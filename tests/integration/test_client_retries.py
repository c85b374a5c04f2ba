"""Safe retries over a real network path: a proxy drops the connection after the gateway answered,
and the client's retry with the same call_id gets the recorded answer, the tool having run once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis
from envscaler_client import AsyncEnvClient, EnvClient, RetryPolicy, TransportError

from envscaler.server.store import lock_key
from tests.integration.gateway_fixtures import COUNTER
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import REDIS_DB, FlakyProxy, LiveGateway

FAST_RETRIES = RetryPolicy(attempts=8, backoff=0.05)


@pytest.fixture
def proxy(live_gateway: LiveGateway) -> Iterator[FlakyProxy]:
    with FlakyProxy(live_gateway.port) as proxy:
        yield proxy


def request_line(method: str, path: str) -> str:
    return f"{method} {path} HTTP/1.1"


def test_a_lost_answer_to_a_call_is_retried_and_the_tool_runs_once(
        proxy: FlakyProxy, live_gateway: LiveGateway) -> None:
    with EnvClient(proxy.url, live_gateway.api_key, retry=FAST_RETRIES) as client, \
            client.create_session(COUNTER, "counter-1") as session:
        proxy.drop("/calls")
        result = session.call("increment", {"name": "a"}, call_id="lost-once")
        assert proxy.dropped == [request_line("POST", f"/v1/sessions/{session.id}/calls")]
        assert result.ok and result.duplicate and result.call_id == "lost-once"
        assert result.result["data"] == {"name": "a", "before": 1, "value": 2}
        assert [entry.call_id for entry in session.trajectory().calls] == ["lost-once"]
        assert session.state().state["counters"]["a"] == 2

        proxy.drop("/state")  # reads are retried too
        assert session.state().state["counters"]["a"] == 2
        assert proxy.dropped[-1] == request_line("GET", f"/v1/sessions/{session.id}/state")


async def test_the_async_client_retries_a_lost_answer_with_its_generated_call_id(
        proxy: FlakyProxy, live_gateway: LiveGateway) -> None:
    async with AsyncEnvClient(proxy.url, live_gateway.api_key, retry=FAST_RETRIES) as client, \
            client.create_session(COUNTER, "counter-1") as session:
        proxy.drop("/calls", times=2)
        result = await session.call("increment", {"name": "b"})
        assert len(proxy.dropped) == 2 and result.duplicate and result.result["data"]["value"] == 1
        calls = (await session.trajectory()).calls
        assert [entry.call_id
                for entry in calls] == [result.call_id] and len(result.call_id or "") == 32
        assert (await session.state()).state["counters"] == {"a": 1, "b": 1}


def test_session_creation_is_not_retried_after_its_answer_is_lost(
        proxy: FlakyProxy, live_gateway: LiveGateway) -> None:
    with EnvClient(proxy.url, live_gateway.api_key, retry=FAST_RETRIES) as client:
        proxy.drop("POST /v1/sessions HTTP")
        with pytest.raises(TransportError) as caught:
            client.create_session(COUNTER, "counter-1")
        assert not caught.value.unreachable
        # The gateway created one session (closed when it stops); the client made no second one.
        assert proxy.dropped == [request_line("POST", "/v1/sessions")]
        assert proxy.statuses("POST /v1/sessions HTTP") == []


async def test_a_busy_session_answers_503_with_retry_after_and_the_call_is_retried(
        proxy: FlakyProxy, live_gateway: LiveGateway) -> None:
    store = redis.Redis.from_url(live_gateway.settings.redis_url or "")
    assert store.connection_pool.connection_kwargs["db"] == REDIS_DB
    async with AsyncEnvClient(proxy.url, live_gateway.api_key, retry=FAST_RETRIES) as client, \
            client.create_session(COUNTER, "counter-1") as session:
        # nap holds the session for 1.5 s; the gateway waits 0.5 s for a busy session, then 503.
        nap = asyncio.create_task(session.call("nap", {"seconds": 1.5}))
        for _ in range(1000):
            if store.exists(lock_key(session.id)):
                break
            await asyncio.sleep(0.005)
        result = await session.call("increment", {"name": "a"})
        assert (await nap).ok and result.ok and not result.duplicate
        assert 503 in proxy.statuses("/calls") and proxy.statuses("/calls").count(200) == 2
        assert [entry.name for entry in (await session.trajectory()).calls] == ["nap", "increment"]
    store.close()
