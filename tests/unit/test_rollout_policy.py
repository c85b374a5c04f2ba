"""The rollout's model side without a gateway: `ChatCompletionsPolicy` (httpx) against the local
scripted server, the simulated user's reply parsing, the prompts, and the normalisation of what
a policy returns."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from envscaler_client.rollout import (
    ChatCompletionsPolicy,
    ModelError,
    SimulatedUser,
    agent_system_prompt,
    parse_user_reply,
    user_system_prompt,
)
from envscaler_client.rollout.episode import normalize_reply, normalize_tool_calls
from envscaler_client.rollout.policy import parse_completion, wire_message

from tests.fixtures.rollout.scripted_chat import ScriptedChat, calls, failure

TOOLS = [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}]


@pytest.fixture
def chat() -> Iterator[ScriptedChat]:
    with ScriptedChat().running() as server:
        yield server


async def test_the_policy_sends_the_conversation_and_reads_tool_calls_and_usage(
        chat: ScriptedChat) -> None:
    chat.script("m", "hello", ["(turn 0: not asked)",
                               calls(("ping", {"n": 1}), ("ping", "{bad"), content="thinking")])
    async with ChatCompletionsPolicy(chat.url, "m", "sk-test", temperature=0.2, max_tokens=64,
                                     extra_body={"top_p": 0.9}) as policy:
        message = await policy.with_seed(4)(
            [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"},
             {"role": "assistant", "content": "x", "reasoning_content": "r", "token_ids": [1]},
             {"role": "user", "content": "again"}], TOOLS)
    assert message["content"] == "thinking" and message["finish_reason"] == "tool_calls"
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"n": 1}', "{bad"]
    assert message["usage"] == {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}
    [request] = chat.requests
    body = request["body"]
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert (body["model"], body["temperature"], body["max_tokens"], body["seed"],
            body["top_p"]) == ("m", 0.2, 64, 4, 0.9)
    assert body["tools"] == TOOLS
    # only chat-completions fields go out; a trainer's extras stay home
    assert body["messages"][2] == {"role": "assistant", "content": "x"}


async def test_server_errors_are_retried_then_reported(chat: ScriptedChat) -> None:
    chat.script("m", "flaky", [failure(503, "busy", times=2, then="ok now")])
    chat.script("m", "down", [failure(500, "on fire")])
    chat.script("m", "wrong", [failure(404, "no such model")])
    async with ChatCompletionsPolicy(chat.url, "m", attempts=3, backoff=0.001) as policy:
        answer = await policy([{"role": "user", "content": "flaky"}])
        assert answer["content"] == "ok now" and len(chat.requests_for(marker="flaky")) == 3
        with pytest.raises(ModelError) as down:
            await policy([{"role": "user", "content": "down"}])
        assert down.value.type == "HTTP500" and "on fire" in down.value.message
        assert len(chat.requests_for(marker="down")) == 3
        with pytest.raises(ModelError) as wrong:  # not retried: it would not get better
            await policy([{"role": "user", "content": "wrong"}])
        assert wrong.value.status == 404 and len(chat.requests_for(marker="wrong")) == 1


async def test_an_unreachable_endpoint_is_a_model_error() -> None:
    async with ChatCompletionsPolicy("http://127.0.0.1:9/v1", "m", attempts=2,
                                     backoff=0.001) as policy:
        with pytest.raises(ModelError) as caught:
            await policy([{"role": "user", "content": "hi"}])
    assert caught.value.unreachable and caught.value.type == "ConnectError"


def test_answers_that_are_not_chat_completions_are_model_errors() -> None:
    with pytest.raises(ModelError) as caught:
        parse_completion({"object": "error", "detail": "?"})
    assert caught.value.type == "InvalidResponse"
    message = parse_completion({"choices": [{"message": {"content": "hi", "reasoning": "why"},
                                             "finish_reason": "stop"}]})
    assert message == {"role": "assistant", "content": "hi", "reasoning_content": "why",
                       "finish_reason": "stop"}
    assert wire_message({"role": "assistant", "tool_calls": []}) == {
        "role": "assistant", "tool_calls": [], "content": None}


async def test_the_simulated_user_separates_its_thoughts_and_its_stop(chat: ScriptedChat) -> None:
    chat.script("u", "TASK-1", ["# Thought\nhm\n# Reply\nI need counter a at 3.",
                                "# Thought\nall done\n# Reply\n###STOP###"])
    async with SimulatedUser(chat.url, "u") as user:
        system = user.system_prompt("TASK-1: bring counter a to 3")
        conversation = [{"role": "system", "content": system},
                        {"role": "user", "content": "Hello!"}]
        first = await user.respond(conversation)
        assert (first.reply, first.stop) == ("I need counter a at 3.", False)
        assert first.usage["total_tokens"] == 25
        conversation += [{"role": "assistant", "content": first.raw},
                         {"role": "user", "content": "Done."}]
        second = await user.respond(conversation)
        assert second.stop and second.reply == ""
    body = chat.requests[0]["body"]
    assert body["temperature"] == 0.7 and "tools" not in body


@pytest.mark.parametrize(("raw", "expected"), [
    ("# Thought\nx\n# Reply\nHello there", ("Hello there", False)),
    ("#Thought:\nx\n## Reply:\nHi ###STOP###", ("Hi", True)),
    ("Just text", ("Just text", False)),
    ("###STOP###", ("", True)),
    ("# Thought\nonly a thought", ("", False)),
    ("# Thought\nthe word # Reply inline\n# Reply\nfinal", ("final", False)),
])
def test_user_reply_parsing(raw: str, expected: tuple[str, bool]) -> None:
    assert parse_user_reply(raw) == expected


def test_prompts_carry_the_environment_and_the_task() -> None:
    rules = ["Members may borrow 5 books.", "Fines above 10.00 block checkouts."]
    single = agent_system_prompt("A library.", rules)
    assert "A library." in single and all(rule in single for rule in rules)
    assert "will not answer questions" in single
    conversation = agent_system_prompt("A library.", None, "conversation")
    assert "talking with a user" in conversation and "Rules" not in conversation
    with pytest.raises(ValueError):
        agent_system_prompt("A library.", rules, "chat")
    user = user_system_prompt("Renew loan L-1.")
    assert "Renew loan L-1." in user and "###STOP###" in user and "# Reply" in user


def test_tool_calls_are_normalised() -> None:
    class Function:
        name, arguments = "ping", {"n": 1}

    class Call:
        id, function = "c1", Function()

    normalised = normalize_tool_calls([
        {"id": "c1", "function": {"name": "a", "arguments": ""}},
        {"id": "c1", "function": {"name": "b", "arguments": None}},  # repeated id
        {"function": {"arguments": "{}"}},                           # no id, no name
        Call(),                                                      # an SDK-like object
    ], step=7)
    assert [c["id"] for c in normalised] == ["c1", "call_7_1", "call_7_2", "call_7_3"]
    assert [c["function"]["name"] for c in normalised] == ["a", "b", "", "ping"]
    assert [c["function"]["arguments"] for c in normalised] == ["{}", "{}", "{}", '{"n": 1}']
    assert all(c["type"] == "function" for c in normalised)


def test_policy_replies_are_normalised() -> None:
    message, usage, finish = normalize_reply("plain text", 1)
    assert message == {"role": "assistant", "content": "plain text"} and usage is None
    message, usage, finish = normalize_reply(
        {"content": "x", "tool_calls": [], "usage": {"total_tokens": 3}, "finish_reason": "stop",
         "logprobs": [0.1]}, 2)
    assert message == {"role": "assistant", "content": "x", "logprobs": [0.1]}
    assert usage == {"total_tokens": 3} and finish == "stop"
    with pytest.raises(TypeError):
        normalize_reply(42, 3)
    assert json.loads(json.dumps(message))


async def test_the_reference_policy_answers_each_user_turn_with_its_own_calls() -> None:
    from envscaler_client.rollout import ReferencePolicy

    policy = ReferencePolicy.per_turn([[{"name": "a"}], [], [{"name": "b", "arguments": {"x": 1}}]])
    messages: list[dict] = [{"role": "system", "content": "s"}, {"role": "user", "content": "1"}]

    async def answer() -> dict:
        reply = await policy(messages)
        messages.append(reply)
        return reply

    assert (await answer())["tool_calls"][0]["function"]["name"] == "a"
    assert (await answer())["content"] == "Task Completed."
    messages.append({"role": "user", "content": "2"})
    assert (await answer())["content"] == "Task Completed."
    messages.append({"role": "user", "content": "3"})
    third = await answer()
    assert third["tool_calls"][0]["function"] == {"name": "b", "arguments": '{"x": 1}'}
    assert third["tool_calls"][0]["id"] == "ref_3_1"
    assert (await answer())["content"] == "Task Completed."
    assert policy.solution == [{"name": "a"}, {"name": "b", "arguments": {"x": 1}}]
