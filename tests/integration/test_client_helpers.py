"""The helpers of agent loops and rollouts: `run_sessions` (many sessions, bounded concurrency) and
`tool_message` (a model's tool call in, the ``tool`` message out), against a live gateway."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from envscaler_client import (
    AsyncEnvClient,
    AsyncSession,
    EnvClient,
    NotFoundError,
    SessionClosedError,
    SessionSpec,
    async_tool_message,
    run_sessions,
    tool_message,
)

from tests.integration.gateway_fixtures import COUNTER
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import LiveGateway


async def test_run_sessions_bounds_concurrency_keeps_order_and_isolates_failures(
        live_gateway: LiveGateway) -> None:
    specs: list[SessionSpec | dict[str, object]] = [
        SessionSpec(COUNTER, "counter-1", seed=n) for n in range(20)
    ]
    specs.append({"env": COUNTER, "scenario": "no-such-scenario"})
    open_now, most_open, finished = 0, 0, []
    session_ids: list[str] = []

    async def rollout(session: AsyncSession) -> tuple[int | None, float]:
        nonlocal open_now, most_open
        open_now += 1
        most_open = max(most_open, open_now)
        try:
            session_ids.append(session.id)
            await session.call("increment", {"name": "a", "by": 2})
            if session.seed == 7:
                raise ValueError("rollout 7 failed")
            await session.call("increment", {"name": "b"})
            return session.seed, (await session.validate()).reward
        finally:
            open_now -= 1

    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client:
        results = await run_sessions(client, specs, rollout, concurrency=5,
                                     on_result=lambda index, _result: finished.append(index))
        assert 1 <= most_open <= 5
        assert sorted(finished) == list(range(21))
        for seed, result in enumerate(results[:20]):
            if seed == 7:
                assert isinstance(result, ValueError) and str(result) == "rollout 7 failed"
            else:
                assert result == (seed, 1.0)
        assert isinstance(results[20], NotFoundError) and results[20].type == "UnknownScenario"
        assert len(session_ids) == 20
        for session_id in session_ids:  # every session was closed, the failed one too
            assert (await client.session(session_id)).closed


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_tool_message_turns_every_kind_of_model_call_into_a_message(
        live_gateway: LiveGateway) -> None:
    with EnvClient(live_gateway.url, live_gateway.api_key) as client:
        session = client.create_session(COUNTER, "counter-1")
        good = tool_message(session, tool_call("call_1", "increment", '{"name": "a", "by": 2}'))
        assert good["role"] == "tool" and good["tool_call_id"] == "call_1"
        assert json.loads(good["content"])["data"]["value"] == 3

        sdk_object = SimpleNamespace(
            id="call_2", function=SimpleNamespace(name="explode", arguments='{"message": "x"}'))
        failed = json.loads(tool_message(session, sdk_object)["content"])
        assert failed["error"]["type"] == "ToolException"

        malformed = tool_message(session, tool_call("call_3", "increment", '{"name": "a", '))
        error = json.loads(malformed["content"])["error"]
        assert malformed["tool_call_id"] == "call_3"
        assert error["type"] == "InvalidArguments" and error["field"] == "arguments"

        wrong_type = json.loads(
            tool_message(session, tool_call("call_4", "increment", '{"name": 1}'))["content"])
        assert wrong_type["error"]["field"] == "name"

        unknown = json.loads(tool_message(session, tool_call("call_5", "fly", "{}"))["content"])
        assert unknown["error"]["type"] == "UnknownTool"

        # Models reuse ids like call_1 across turns: each call still runs.
        repeated = tool_message(session, tool_call("call_1", "increment", '{"name": "a"}'))
        assert json.loads(repeated["content"])["data"]["value"] == 4
        assert [entry.name
                for entry in session.trajectory().calls] == ["increment", "explode", "increment"]

        session.close()
        with pytest.raises(SessionClosedError):  # the episode cannot go on: that is an exception
            tool_message(session, tool_call("call_6", "increment", '{"name": "a"}'))


async def test_async_tool_message(live_gateway: LiveGateway) -> None:
    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client, \
            client.create_session(COUNTER, "counter-2") as session:
        message = await async_tool_message(session, tool_call("c1", "increment", '{"name": "z"}'))
        assert json.loads(message["content"])["data"]["value"] == 11
        bad = await async_tool_message(session, tool_call("c2", "increment", "not json"))
        assert json.loads(bad["content"])["error"]["type"] == "InvalidArguments"
        assert (await session.validate()).reward == 1.0
