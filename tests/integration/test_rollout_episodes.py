"""`run_episode` against a live gateway (real Redis, real Docker sandboxes), with the agent and the
simulated user played by a local OpenAI-compatible server that replays scripted replies: both
modes, parallel tool calls, malformed tool calls, the step limit, custom policy callables (the
trainer API), and failures of the model and of the gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from envscaler_client import AsyncEnvClient, AsyncSession
from envscaler_client.rollout import (
    ChatCompletionsPolicy,
    SimulatedUser,
    run_episode,
)

from tests.fixtures.rollout.scripted_chat import ScriptedChat, calls, failure
from tests.integration.gateway_fixtures import COUNTER, LIBRARY
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import LiveGateway

AGENT, USER = "agent-model", "user-model"
COUNTER_1 = "Bring counter a to 3"  # the tasks, as markers of the scripts
COUNTER_2 = "Bring counter z to 11"


@pytest.fixture(scope="module")
def chat_server() -> Iterator[ScriptedChat]:
    with ScriptedChat().running() as chat:
        yield chat


@pytest.fixture
def chat(chat_server: ScriptedChat) -> ScriptedChat:
    chat_server.reset()
    return chat_server


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [message["role"] for message in messages]


async def test_every_parallel_call_runs_in_order_and_the_episode_completes(
        live_gateway: LiveGateway, chat: ScriptedChat) -> None:
    # The server numbers tool calls call_0, call_1... in every turn: the runner must still run
    # the repeated ids (the gateway's idempotency key is a fresh call_id, not the model's id).
    chat.script(AGENT, COUNTER_1, [
        calls(("increment", {"name": "a", "by": 1}), ("increment", {"name": "b"})),
        calls(("increment", {"name": "a", "by": 1})),
        "Done: counter a is 3 and counter b exists.",
    ])
    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client, \
            ChatCompletionsPolicy(chat.url, AGENT, "model-key", temperature=0.5) as policy:
        async with client.create_session(COUNTER, "counter-1", seed=3) as session:
            episode = await run_episode(session, policy.with_seed(3))
            trajectory = await session.trajectory()
            tools = session.tools
            detail = await client.env(COUNTER)

    assert episode.termination == "completed" and episode.error is None
    assert (episode.reward, episode.passed, episode.total, episode.steps) == (1.0, 2, 2, 3)
    assert [check.passed for check in episode.checks] == [True, True]
    assert (episode.env, episode.scenario, episode.seed, episode.mode) == (
        COUNTER, "counter-1", 3, "non-conversation")
    assert episode.key == "counter_lab/counter-1/non-conversation/seed=3"
    assert episode.policy == AGENT and episode.task.startswith(COUNTER_1)
    assert roles(episode.messages) == ["system", "user", "assistant", "tool", "tool", "assistant",
                                       "tool", "assistant"]
    assert episode.messages[1]["content"] == episode.task
    assert [m["tool_call_id"] for m in episode.messages if m["role"] == "tool"] == [
        "call_0", "call_1", "call_0"]
    assert [json.loads(m["content"])["data"]["value"]
            for m in episode.messages if m["role"] == "tool"] == [2, 1, 3]
    # in order, each executed once, as the gateway's trajectory shows
    assert [(c.step, c.name, c.arguments, c.ok, c.index) for c in episode.tool_calls] == [
        (1, "increment", {"name": "a", "by": 1}, True, 0),
        (1, "increment", {"name": "b"}, True, 1),
        (2, "increment", {"name": "a", "by": 1}, True, 2)]
    assert [(e.name, e.arguments) for e in trajectory.calls] == [
        ("increment", {"name": "a", "by": 1}), ("increment", {"name": "b"}),
        ("increment", {"name": "a", "by": 1})]
    # what the model was sent: the environment's description, the session's tools, the settings
    requests = chat.requests_for(AGENT, COUNTER_1)
    assert [r["turn"] for r in requests] == [0, 1, 2]
    first = requests[0]["body"]
    assert first["tools"] == tools and first["model"] == AGENT
    assert first["seed"] == 3 and first["temperature"] == 0.5
    assert requests[0]["headers"]["Authorization"] == "Bearer model-key"
    system = first["messages"][0]["content"]
    assert detail.introduction in system and "without calling a tool" in system
    # usage: 2, 5 and 7 messages sent (10 prompt tokens each), 5 completion tokens per answer
    assert episode.usage.agent.model_dump() == {"calls": 3, "prompt_tokens": 140,
                                                "completion_tokens": 15, "total_tokens": 155}
    assert [t.finish_reason for t in episode.turns] == ["tool_calls", "tool_calls", "stop"]
    assert [t.tool_calls for t in episode.turns] == [2, 1, 0]
    assert episode.usage.user.calls == 0 and episode.user_messages == []
    assert episode.timings.started_at > 0 and episode.timings.total_s >= episode.timings.tools_s
    json.loads(episode.to_json())  # one JSONL line


async def test_malformed_tool_calls_go_back_to_the_model_and_the_episode_goes_on(
        live_gateway: LiveGateway, chat: ScriptedChat) -> None:
    chat.script(AGENT, COUNTER_1, [
        calls(("increment", '{"name": "a", "by": '),          # not JSON
              ("decrement", {"name": "a"}),                    # no such tool
              ("increment", {"name": "a", "by": "two"}),      # does not match the schema
              ("explode", {"message": "boom"}),                # the tool itself fails
              ("token", "")),                                  # no arguments at all: {}
        calls(("increment", {"name": "a", "by": 2}), ("increment", {"name": "b"})),
        "All done.",
    ])
    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client, \
            ChatCompletionsPolicy(chat.url, AGENT) as policy:
        async with client.create_session(COUNTER, "counter-1") as session:
            episode = await run_episode(session, policy)

    assert episode.termination == "completed" and episode.reward == 1.0
    first_turn = [c for c in episode.tool_calls if c.step == 1]
    assert [(c.name, c.ok) for c in first_turn] == [
        ("increment", False), ("decrement", False), ("increment", False), ("explode", False),
        ("token", True)]
    assert [c.error["type"] if c.error else None for c in first_turn] == [
        "InvalidArguments", "UnknownTool", "InvalidArguments", "ToolException", None]
    assert first_turn[0].arguments == '{"name": "a", "by": '  # kept as the model wrote it
    assert first_turn[2].error["field"] == "by"
    contents = [json.loads(m["content"]) for m in episode.messages if m["role"] == "tool"][:5]
    assert [c.get("error", {}).get("type") for c in contents] == [
        "InvalidArguments", "UnknownTool", "InvalidArguments", "ToolException", None]
    assert "boom" in contents[3]["error"]["message"]
    # the model saw every error before its next turn
    second = chat.requests_for(AGENT, COUNTER_1)[1]["body"]["messages"]
    assert roles(second) == ["system", "user", "assistant", *["tool"] * 5]
    assert second[2]["tool_calls"][4]["function"]["arguments"] == "{}"


async def test_the_step_limit_ends_the_episode_and_it_is_still_validated(
        live_gateway: LiveGateway, chat: ScriptedChat) -> None:
    chat.script(AGENT, COUNTER_2, [calls(("increment", {"name": "y"}))] * 6)
    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client, \
            ChatCompletionsPolicy(chat.url, AGENT) as policy:
        async with client.create_session(COUNTER, "counter-2") as session:
            episode = await run_episode(session, policy, max_steps=3)
    assert episode.termination == "max_steps" and episode.steps == 3
    assert len(episode.tool_calls) == 3 and len(chat.requests_for(AGENT)) == 3
    assert episode.reward == 0.0 and episode.checks[0].passed is False
    assert episode.messages[-1]["role"] == "tool"


async def test_conversation_mode_with_a_simulated_user(live_gateway: LiveGateway,
                                                      chat: ScriptedChat) -> None:
    chat.script(USER, COUNTER_1, [  # the user's system prompt holds the task
        "# Thought\nStart with counter a.\n# Reply\nPlease bring counter a to 3. (conv one)",
        "# Thought\nNow b.\n# Reply\nThanks! Also create counter b.",
        "# Thought\nEverything is done.\n# Reply\n###STOP###",
    ])
    chat.script(AGENT, "(conv one)", [  # the agent sees the user's first reply
        calls(("increment", {"name": "a", "by": 2})),
        "Counter a is now 3. Anything else?",
        calls(("increment", {"name": "b"})),
        "Counter b is created.",
    ])
    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client, \
            ChatCompletionsPolicy(chat.url, AGENT) as policy, \
            SimulatedUser(chat.url, USER, "user-key") as user:
        async with client.create_session(COUNTER, "counter-1") as session:
            episode = await run_episode(session, policy, mode="conversation", user=user)

    assert episode.termination == "user_stop" and episode.reward == 1.0
    assert episode.mode == "conversation" and episode.steps == 4
    assert roles(episode.messages) == ["system", "user", "assistant", "tool", "assistant", "user",
                                       "assistant", "tool", "assistant"]
    agent_users = [m["content"] for m in episode.messages if m["role"] == "user"]
    assert agent_users == ["Please bring counter a to 3. (conv one)",
                           "Thanks! Also create counter b."]  # never the user's thoughts
    assert "talking with a user" in episode.messages[0]["content"]
    assert roles(episode.user_messages) == ["system", "user", "assistant", "user", "assistant",
                                            "user", "assistant"]
    assert episode.task in episode.user_messages[0]["content"]
    assert "###STOP###" in episode.user_messages[0]["content"]
    assert [m["content"] for m in episode.user_messages if m["role"] == "user"] == [
        "Hello! How can I help you today?", "Counter a is now 3. Anything else?",
        "Counter b is created."]
    assert episode.user_messages[-1]["content"].endswith("###STOP###")
    assert episode.usage.user.calls == 3 and episode.usage.agent.calls == 4
    user_requests = chat.requests_for(USER)
    assert [r["turn"] for r in user_requests] == [0, 1, 2]
    assert all("tools" not in r["body"] and r["body"]["temperature"] == 0.7
               for r in user_requests)
    assert user_requests[0]["headers"]["Authorization"] == "Bearer user-key"


async def test_a_trainer_plugs_its_own_policy_in(live_gateway: LiveGateway) -> None:
    seen: list[tuple[int, list[str]]] = []

    async def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append((len(messages), [tool["function"]["name"] for tool in tools]))
        if not any(message["role"] == "tool" for message in messages):
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "t1", "type": "function",
                 "function": {"name": "increment", "arguments": {"name": "z"}}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}
        return {"role": "assistant", "content": "z is 11 now.", "token_ids": [1, 2, 3]}

    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client:
        async with client.create_session(COUNTER, "counter-2", seed=5) as session:
            episode = await run_episode(session, policy, max_steps=5)
    assert episode.termination == "completed" and episode.reward == 1.0
    assert episode.policy == "policy" and episode.seed == 5
    assert seen[0][0] == 2 and "increment" in seen[0][1] and seen[1][0] == 4
    assert episode.messages[2]["tool_calls"][0]["function"]["arguments"] == '{"name": "z"}'
    assert "usage" not in episode.messages[2]  # counted, not kept in the message
    assert episode.usage.agent.total_tokens == 10 and episode.usage.agent.calls == 2
    assert episode.messages[-1]["token_ids"] == [1, 2, 3]  # a trainer's extra fields stay


async def test_a_failing_policy_ends_its_episode_as_a_model_error(
        live_gateway: LiveGateway, chat: ScriptedChat) -> None:
    async def broken(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        raise RuntimeError("the engine died")

    chat.script(AGENT, COUNTER_2, [failure(500, "model overloaded")])
    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client, \
            ChatCompletionsPolicy(chat.url, AGENT, attempts=2, backoff=0.01) as policy:
        async with client.create_session(COUNTER, "counter-2") as session:
            crashed = await run_episode(session, broken)
        async with client.create_session(COUNTER, "counter-2") as session:
            refused = await run_episode(session, policy)
    assert crashed.termination == "model_error" and crashed.steps == 0
    assert crashed.error is not None and crashed.error.stage == "agent"
    assert (crashed.error.type, crashed.error.message) == ("RuntimeError", "the engine died")
    assert crashed.reward == 0.0  # still validated: the state it left
    assert refused.termination == "model_error" and refused.error is not None
    assert refused.error.type == "HTTP500" and "model overloaded" in refused.error.message
    assert len(chat.requests_for(AGENT)) == 2  # retried once


async def test_a_gateway_failure_ends_its_episode_as_a_gateway_error(
        live_gateway: LiveGateway) -> None:
    holder: dict[str, AsyncSession] = {}

    async def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        await holder["session"].close()  # the session is gone under the agent's feet
        return {"role": "assistant", "tool_calls": [
            {"id": "x", "function": {"name": "increment", "arguments": '{"name": "z"}'}}]}

    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client:
        async with client.create_session(COUNTER, "counter-2") as session:
            holder["session"] = session
            episode = await run_episode(session, policy)
    assert episode.termination == "gateway_error" and episode.error is not None
    assert episode.error.stage == "tool" and episode.error.type == "SessionClosed"


async def test_the_system_prompt_has_the_environment_rules(live_gateway: LiveGateway) -> None:
    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return "Nothing to do."

    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client:
        detail = await client.env(LIBRARY)
        async with client.create_session(LIBRARY, "library_loans-002") as session:
            episode = await run_episode(session, answer)
    system = episode.messages[0]["content"]
    assert detail.introduction in system
    assert all(rule in system for rule in detail.constraint_rules)
    assert episode.termination == "completed" and episode.reward is not None
    assert episode.reward < 1.0 and len(episode.checks) == episode.total
