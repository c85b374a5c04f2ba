"""Ordered calls (``seq``, `envscaler.server.sessions.ordering`) against a real gateway app, real Redis and
real Docker sandboxes: calls sent at once, last first, take effect in their ``seq`` order; a
refused call takes its turn; a missing one is waited for while the session is idle, then skipped,
and refused when it comes late; a reset numbers from 0 again."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import COUNTER, running_gateway

pytestmark = pytest.mark.parametrize("backend_kwargs", ["docker"], indirect=True)


async def _open(client: httpx.AsyncClient) -> str:
    response = await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"})
    assert response.status_code == 201, response.text
    return str(response.json()["session_id"])


async def _call(client: httpx.AsyncClient, session_id: str, name: str, seq: int,
                **body: Any) -> httpx.Response:
    return await client.post(f"/v1/sessions/{session_id}/calls",
                             json={"name": "increment", "arguments": {"name": name}, "seq": seq,
                                   **body})


async def _trajectory(client: httpx.AsyncClient, session_id: str) -> list[tuple[str, Any]]:
    entries = (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]
    return [(e.get("kind", "call"), (e.get("arguments") or {}).get("name")) for e in entries]


async def test_calls_sent_last_first_take_effect_in_seq_order(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        session_id = await _open(client)
        names = [f"c{n}" for n in range(6)]
        answers = await asyncio.gather(*(_call(client, session_id, names[seq], seq)
                                         for seq in reversed(range(6))))  # seq 5 starts first
        assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
        assert sorted(a.json()["index"] for a in answers) == list(range(6))
        assert await _trajectory(client, session_id) == [("call", name) for name in names]
        tools = (await client.get(f"/v1/sessions/{session_id}/tools")).json()
        assert tools["next_seq"] == 6

        # a reset starts a new episode: its calls are numbered from 0 again
        assert (await client.post(f"/v1/sessions/{session_id}/reset", json={})).status_code == 200
        again = await asyncio.gather(_call(client, session_id, "r1", 1),
                                     _call(client, session_id, "r0", 0))
        assert [a.status_code for a in again] == [200, 200]
        assert (await _trajectory(client, session_id))[-2:] == [("call", "r0"), ("call", "r1")]


async def test_refused_lost_late_and_repeated_ordered_calls(make_settings) -> None:
    async with running_gateway(make_settings(call_order_wait=1.0)) as (_, client):
        session_id = await _open(client)
        # seq 0 is refused (its arguments do not match the schema): it still takes its turn
        later, refused = await asyncio.gather(
            _call(client, session_id, "b", 1),
            client.post(f"/v1/sessions/{session_id}/calls",
                        json={"name": "increment", "arguments": {"name": "a", "by": "x"},
                              "seq": 0}))
        assert refused.status_code == 422 and later.status_code == 200, later.text

        # seq 2 never comes (e.g. refused before it reached the session): seq 3 runs once the
        # session was idle for ENVSCALER_CALL_ORDER_WAIT, and seq 2 arriving late is refused
        skipped = await _call(client, session_id, "d", 3, call_id="d-3")
        assert skipped.status_code == 200, skipped.text
        late = await _call(client, session_id, "c", 2)
        assert late.status_code == 409, late.text
        error = late.json()["error"]
        assert error["type"] == "CallOutOfOrder" and error["field"] == "seq", error
        # a retry of a recorded call answers its result, whatever its seq
        retried = await _call(client, session_id, "d", 3, call_id="d-3")
        assert retried.status_code == 200 and retried.json()["duplicate"] is True
        assert await _trajectory(client, session_id) == [("call", "b"), ("call", "d")]

        far = await _call(client, session_id, "e", 5000)  # a mistake: refused, not waited on
        assert far.status_code == 409 and "ahead" in far.json()["error"]["message"], far.text
        for bad in (-1, "1", True, 2**31):
            answer = await _call(client, session_id, "e", bad)  # type: ignore[arg-type]
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["field"] == "body.seq", answer.text


async def test_ordered_calls_split_between_two_gateways_keep_their_order(make_settings) -> None:
    """The order lives in Redis: calls of one turn spread over two gateways (as over the workers
    of `envscaler serve`, or gateways behind a balancer) still take effect in seq order."""
    async with running_gateway(make_settings()) as (_, first), \
            running_gateway(make_settings()) as (_, second):
        session_id = await _open(first)
        names = [f"c{n}" for n in range(6)]
        answers = await asyncio.gather(*(_call((first, second)[seq % 2], session_id,
                                               names[seq], seq)
                                         for seq in reversed(range(6))))
        assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
        assert await _trajectory(second, session_id) == [("call", name) for name in names]
