"""The tool call's fast path (`envscaler.server.fastcall`) answers exactly as the documented route does.

A body sent as ``application/json`` is the fast path's when it is well formed; the same body sent
as ``application/merge-patch+json`` (JSON to FastAPI, not to the fast path) always takes the route.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from envscaler.server import fastcall
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import COUNTER, LIBRARY, running_gateway

ADMIN = "admin-key-0123456789"
FAST = {"content-type": "application/json"}
ROUTE = {"content-type": "application/merge-patch+json"}
AUTH = {"Authorization": f"Bearer {ADMIN}"}


def answer(response: Any) -> tuple[int, bytes, dict[str, str]]:
    headers = {k: v for k, v in response.headers.items() if k != "date"}
    return response.status_code, response.content, headers


async def both(client: Any, path: str, body: bytes, **headers: str) -> tuple[Any, Any]:
    fast = await client.post(path, content=body, headers={**FAST, **headers})
    route = await client.post(path, content=body, headers={**ROUTE, **headers})
    return fast, route


async def test_refused_and_failed_calls_answer_as_the_route(make_settings) -> None:
    async with running_gateway(make_settings(api_keys=[ADMIN])) as (_, client):
        created = await client.post(
            "/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"}, headers=AUTH
        )
        session_id = created.json()["session_id"]
        agent = {"Authorization": f"Bearer {created.json()['agent_token']}"}
        other = await client.post("/v1/sessions", json={"env": LIBRARY}, headers=AUTH)
        calls = f"/v1/sessions/{session_id}/calls"
        cases: list[tuple[str, bytes, dict[str, str]]] = [
            (calls, b'{"arguments": {}}', AUTH),  # no name
            (calls, b'{"name": ""}', AUTH),
            (calls, b'{"name": "' + b"x" * 201 + b'"}', AUTH),
            (calls, b'{"name": "increment", "colour": "red"}', AUTH),
            (calls, b'{"name": "increment", "arguments": null}', AUTH),
            (calls, b'{"name": "increment", "arguments": 5}', AUTH),
            (calls, b'{"name": "increment", "arguments": {"name": "a"}, "call_id": ""}', AUTH),
            (calls, b'{"name": 5}', AUTH),
            (calls, b"{not json", AUTH),
            (calls, b"[]", AUTH),
            (calls, b"", AUTH),
            (calls, b'{"name": "increment", "arguments": {"name": "a", "by": NaN}}', AUTH),
            (calls, b'{"name": "increment", "arguments": {"name": "a", "by": 1e400}}', AUTH),
            (calls, b'{"name": "increment", "arguments": {"name": "\\ud800"}}', AUTH),
            (calls, b'{"name": "increment", "arguments": {"name": "a", "by": "2"}}', AUTH),
            (calls, b'{"name": "increment", "arguments": {"nom": "a"}}', AUTH),
            (calls, b'{"name": "increment", "arguments": "{\\"name\\": 1}"}', AUTH),
            (calls, b'{"name": "increment", "arguments": "not json"}', AUTH),
            (calls, b'{"name": "no_such_tool"}', AUTH),
            (calls, b'{"name": "increment", "arguments": {"name": "a"}}', {}),  # no key: 401
            (calls, b'{"name": "increment", "arguments": {"name": "a"}}',
             {"Authorization": "Bearer wrong"}),
            (f"/v1/sessions/{other.json()['session_id']}/calls",
             b'{"name": "increment", "arguments": {"name": "a"}}', agent),  # 403
            ("/v1/sessions/" + "A" * 24 + "/calls", b'{"name": "increment"}', AUTH),  # 404
            ("/v1/sessions/bad!id/calls", b'{"name": "increment"}', AUTH),
            ("/v1/sessions/" + "A" * 101 + "/calls", b'{"name": "increment"}', AUTH),  # 422
            (calls + "/", b'{"name": "increment"}', AUTH),
        ]
        for path, body, headers in cases:
            fast, route = await both(client, path, body, **headers)
            assert fast.status_code != 200, (path, body, fast.text)
            assert answer(fast) == answer(route), (path, body)
        # None of them was recorded
        trajectory = await client.get(f"/v1/sessions/{session_id}/trajectory", headers=AUTH)
        assert trajectory.json()["entries"] == []


async def test_calls_share_their_results_and_call_ids_with_the_route(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        created = await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"})
        calls = f"/v1/sessions/{created.json()['session_id']}/calls"
        body = b'{"name": "increment", "arguments": {"name": "a", "by": 2}, "call_id": "c-1"}'
        with mock.patch.object(fastcall, "answer_call", wraps=fastcall.answer_call) as spy:
            first = await client.post(calls, content=body, headers=FAST)
            again = await client.post(calls, content=body, headers=ROUTE)  # the route: stored
            assert spy.call_count == 1  # the first took the fast path, the repeat did not
            tool_error = await client.post(
                calls, json={"name": "explode", "arguments": {"message": "no"}}
            )
            as_text = await client.post(
                calls, json={"name": "increment", "arguments": '{"name": "b"}', "call_id": "c-2"}
            )
            repeat = await client.post(calls, content=b'{"name": "increment", "call_id": "c-2"}',
                                       headers=FAST)
            assert spy.call_count == 4
        assert first.status_code == again.status_code == 200
        assert first.headers["content-type"] == again.headers["content-type"] == "application/json"
        one, two = first.json(), again.json()
        assert one["result"]["data"] == {"name": "a", "before": 1, "value": 3}
        assert (one["duplicate"], two["duplicate"]) == (False, True)
        assert {**one, "duplicate": True} == two
        assert tool_error.status_code == 200 and tool_error.json()["ok"] is False
        assert tool_error.json()["error"]["type"] == "ToolException"
        assert as_text.json()["result"]["data"]["value"] == 1
        assert repeat.json() == {**as_text.json(), "duplicate": True}
        entries = (
            await client.get(calls.replace("/calls", "/trajectory"))
        ).json()["entries"]
        assert [(e["name"], e["call_id"], e["ok"]) for e in entries] == [
            ("increment", "c-1", True), ("explode", None, False), ("increment", "c-2", True)
        ]
