"""One episode: a policy drives one session through its scenario, and the trajectory, the
reward and how it ended are recorded as an `Episode` (one line of a rollout's JSONL).

    async with client.create_session("library_loans", scenario="library_loans-002") as session:
        episode = await run_episode(session, policy)
        await session.reset("library_loans-003", seed=1)   # the next episode, same sandbox
        another = await run_episode(session, policy)
    episode.reward, episode.termination, episode.messages

An episode records only what it ran itself, so a session reset between episodes (the cheap path
for many episodes of one environment) serves each one exactly as a new session would.

Better than the paper (EnvScaler §7): every tool call of a turn runs, in order (the paper keeps
the first); a malformed call (arguments that are not JSON or do not match the schema, an
unknown tool, a call past its deadline) goes back to the model as a ``tool`` message and the
episode goes on (the paper ends it with reward 0); truncation at the step limit still validates
the final state (the paper gives 0; ``termination`` says it was truncated).

A multi-turn scenario (a scripted user who speaks several times, as in BFCL multi-turn) plays
its user turns in order: once the agent answers a turn without a tool call, the next user message
follows; every call and answer records the user turn it answered (``user_turn``, from 0).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from envscaler_client._api import result_content
from envscaler_client.aio import AsyncSession
from envscaler_client.errors import (
    CallTimeoutError,
    EnvScalerError,
    InvalidArgumentsError,
    NotFoundError,
)
from envscaler_client.models import EnvDetail
from envscaler_client.rollout.policy import Message, Policy
from envscaler_client.rollout.prompts import (
    CONVERSATION,
    DEFAULT_MAX_STEPS,
    MODES,
    NON_CONVERSATION,
    USER_OPENING,
    agent_system_prompt,
)
from envscaler_client.rollout.user import SimulatedUser

SCHEMA_VERSION = 1

Termination = Literal["completed", "user_stop", "max_steps", "model_error", "user_error",
                      "gateway_error", "internal_error"]
TERMINATIONS: tuple[str, ...] = ("completed", "user_stop", "max_steps", "model_error",
                                 "user_error", "gateway_error", "internal_error")
"""completed: the agent answered without a tool call (non-conversation); user_stop: the
simulated user sent the stop signal (conversation); max_steps: the step limit was reached;
model_error / user_error: the agent's / the simulated user's model failed; gateway_error: the
gateway failed (session creation, a call, validation: e.g. ``CheckExhausted``, a check that ran
out of its budget, which leaves no reward rather than 0); internal_error: a bug of the runner."""
NATURAL_ENDS = frozenset({"completed", "user_stop"})
ERROR_TERMINATIONS = frozenset({"model_error", "user_error", "gateway_error", "internal_error"})


def episode_key(env: str, scenario: str | None, mode: str, seed: int | None,
                member: int = 0) -> str:
    """What identifies an episode in a rollout file (resuming skips keys already there)."""
    key = f"{env}/{scenario or '-'}/{mode}/seed={seed}"
    return f"{key}/member={member}" if member else key


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class TokenUsage(_Record):
    """Summed over the model's answers; ``calls`` counts the policy's answers."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add(self, usage: Mapping[str, Any] | None) -> None:
        self.calls += 1
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = (usage or {}).get(name)
            if isinstance(value, int):
                setattr(self, name, getattr(self, name) + value)


class Usage(_Record):
    agent: TokenUsage = Field(default_factory=TokenUsage)
    user: TokenUsage = Field(default_factory=TokenUsage)


class Timings(_Record):
    """Seconds; ``started_at`` is a unix time."""

    started_at: float = 0.0
    session_s: float = 0.0
    agent_s: float = 0.0
    user_s: float = 0.0
    tools_s: float = 0.0
    validate_s: float = 0.0
    total_s: float = 0.0


class EpisodeError(_Record):
    stage: str
    """``session`` (open or describe), ``agent``, ``user``, ``tool``, ``validate``, ``runner``."""
    type: str
    message: str


class ToolCallRecord(_Record):
    """One tool call of the agent, as executed through the gateway."""

    step: int
    id: str
    name: str
    arguments: Any
    """The arguments object, or the text the model wrote when it is not JSON."""
    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    index: int | None = None
    """The call's position in the session's trajectory (None when the gateway refused it)."""
    user_turn: int = 0
    """The scripted user's message this call answered (0: the task)."""
    duration_ms: float = 0.0


class TurnRecord(_Record):
    """One answer of the agent's policy."""

    step: int
    user_turn: int = 0
    """The scripted user's message this answer was to (0: the task)."""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    tool_calls: int = 0
    duration_s: float = 0.0


class CheckRecord(_Record):
    item: str
    passed: bool
    error: str | None = None


class Episode(_Record):
    """One line of a rollout's JSONL output."""

    version: int = SCHEMA_VERSION
    key: str
    env: str
    scenario: str | None = None
    split: str | None = None
    seed: int | None = None
    mode: str = NON_CONVERSATION
    policy: str | None = None
    task: str | None = None
    session_id: str | None = None
    epoch: int | None = None
    """The session's epoch the episode ran in (`run_rollouts` sets it): 0 on a new session, one
    more after each reset. The session's trajectory keeps this epoch until the next one ends."""
    member: int = 0
    """Its place in its group: episodes of one scenario and seed started together, each on a
    fork of the first one's session (`run_rollouts`), as GRPO's group baseline wants."""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    """The agent's conversation in chat-completions form: system, user, assistant (with
    ``tool_calls``), tool."""
    user_turns: list[str] | None = None
    """A multi-turn scenario's scripted user messages, the first being the task."""
    user_messages: list[dict[str, Any]] = Field(default_factory=list)
    """The simulated user's side (conversation mode): its system prompt, the agent's messages as
    ``user``, its raw replies (with ``# Thought``) as ``assistant``."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    steps: int = 0
    termination: Termination
    error: EpisodeError | None = None
    reward: float | None = None
    passed: int | None = None
    total: int | None = None
    checks: list[CheckRecord] = Field(default_factory=list)
    validation_error: EpisodeError | None = None
    usage: Usage = Field(default_factory=Usage)
    timings: Timings = Field(default_factory=Timings)

    @property
    def finished(self) -> bool:
        """Ended by the agent or the user, not by an error or the step limit."""
        return self.termination in NATURAL_ENDS

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False)


class _Ended(Exception):
    """Ends the interaction: the termination and its error."""

    def __init__(self, termination: Termination, error: EpisodeError | None = None) -> None:
        super().__init__(termination)
        self.termination = termination
        self.error = error


def _error(stage: str, exc: BaseException) -> EpisodeError:
    kind = getattr(exc, "type", None)
    message = getattr(exc, "message", None)
    return EpisodeError(stage=stage, type=kind if isinstance(kind, str) else type(exc).__name__,
                        message=message if isinstance(message, str) else str(exc))


# ---------------------------------------------------------------- normalising the model's output

def normalize_tool_calls(calls: Sequence[Any], step: int) -> list[dict[str, Any]]:
    """OpenAI ``tool_calls`` items (dicts or SDK-like objects) as plain dicts: an id for each
    (unique within the turn), ``arguments`` as a JSON text (``{}`` for none), ``type`` set."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, call in enumerate(calls):
        if isinstance(call, Mapping):
            function = call.get("function") or {}
            call_id, name = call.get("id"), function.get("name")
            arguments = function.get("arguments")
        else:
            function = getattr(call, "function", None)
            call_id, name = getattr(call, "id", None), getattr(function, "name", None)
            arguments = getattr(function, "arguments", None)
        if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
            arguments = "{}"
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            call_id = f"call_{step}_{number}"
        seen.add(call_id)
        out.append({"id": call_id, "type": "function",
                    "function": {"name": name if isinstance(name, str) else "",
                                 "arguments": arguments}})
    return out


def normalize_reply(reply: Any, step: int) -> tuple[Message, dict[str, Any] | None, str | None]:
    """(the assistant message, its usage, its finish reason) from what a policy returned."""
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}, None, None
    if not isinstance(reply, Mapping):
        raise TypeError(f"the policy returned {type(reply).__name__}, not a message dict")
    message = dict(reply)
    usage = message.pop("usage", None)
    finish_reason = message.pop("finish_reason", None)
    message["role"] = "assistant"
    message.setdefault("content", None)
    calls = message.get("tool_calls")
    if calls:
        message["tool_calls"] = normalize_tool_calls(calls, step)
    else:
        message.pop("tool_calls", None)
    return (message, usage if isinstance(usage, dict) else None,
            finish_reason if isinstance(finish_reason, str) else None)


def _arguments_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# ---------------------------------------------------------------- executing a tool call

async def execute_tool_call(session: AsyncSession, call: Mapping[str, Any],
                            step: int) -> tuple[Message, ToolCallRecord]:
    """Run one normalized tool call; (the ``tool`` message, its record).

    What the model should read and correct becomes an error message: a tool that failed (the
    gateway answers ``ok: false``), arguments that are not JSON or do not match the schema
    (422), an unknown tool (404 ``UnknownTool``), a call past its deadline (504). Anything
    else (session gone, gateway unreachable after retries) raises `EnvScalerError`.
    """
    call_id = call["id"]
    name = call["function"]["name"]
    arguments = call["function"]["arguments"]
    record = ToolCallRecord(step=step, id=call_id, name=name,
                            arguments=_arguments_value(arguments), ok=False)
    started = time.perf_counter()
    if not name:
        error = {"type": "InvalidToolCall", "message": "the tool call names no function"}
        content = json.dumps({"error": error}, ensure_ascii=False)
        record.error = error
    else:
        try:
            # A fresh call_id per call (the gateway's idempotency key), never the model's id:
            # servers that number calls call_0, call_1... in every turn would repeat it.
            # Ordered: the turn's calls take effect in the model's order (`seq`).
            result = await session.call(name, arguments, ordered=True)
        except EnvScalerError as exc:
            if not (isinstance(exc, InvalidArgumentsError | CallTimeoutError)
                    or (isinstance(exc, NotFoundError) and exc.type == "UnknownTool")):
                raise
            error = {"type": exc.type, "message": exc.message}
            if exc.field:
                error["field"] = exc.field
            content = json.dumps({"error": error}, ensure_ascii=False)
            record.error = error
        else:
            content = result_content(result)
            record.ok, record.result, record.index = result.ok, result.result, result.index
            if result.error is not None:
                record.error = result.error.model_dump()
    record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
    return {"role": "tool", "tool_call_id": call_id, "content": content}, record


# ---------------------------------------------------------------- the episode

async def run_episode(session: AsyncSession, policy: Policy, *, mode: str = NON_CONVERSATION,
                      user: SimulatedUser | None = None, max_steps: int | None = None,
                      env: EnvDetail | None = None, system_prompt: str | None = None,
                      task: str | None = None, validate: bool = True,
                      policy_name: str | None = None, split: str | None = None,
                      turns: Sequence[str] | None = None) -> Episode:
    """Drive ``session`` with ``policy`` until the episode ends; the `Episode`.

    ``policy``: ``async (messages, tools) -> assistant message dict`` (or its text); a ``usage``
    key in the message is counted and removed. ``mode``: ``non-conversation`` (the task is the
    first user message; the episode ends when the agent answers without a tool call) or
    ``conversation`` (``user``, a `SimulatedUser`, holds the task and ends with its stop
    signal). ``max_steps``: agent turns, 30 / 40 by default as in the paper. ``env``: the
    environment's description for the system prompt (fetched from the gateway when neither it
    nor ``system_prompt`` is given). The session is validated at the end (``validate``) and not
    closed: that is the caller's (``async with``), who may instead ``reset`` it to the next
    scenario of the environment and run the next episode on it. ``turns``: a multi-turn
    scenario's scripted user messages (non-conversation mode; the first is the task): each
    next one is sent when the agent has answered the one before without a tool call.

    Failures do not raise: the policy failing ends the episode as ``model_error``, the user as
    ``user_error``, the gateway as ``gateway_error``, each with its ``error``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == CONVERSATION and user is None:
        raise ValueError("conversation mode needs a simulated user (user=SimulatedUser(...))")
    if turns is not None and (mode == CONVERSATION or not turns):
        raise ValueError("scripted turns are for non-conversation mode and need a message")
    task = task if task is not None else (turns[0] if turns else session.task)
    if not task:
        raise ValueError("the session has no task (a custom init_config?): pass task=")
    limit = max_steps if max_steps is not None else DEFAULT_MAX_STEPS[mode]
    if limit < 1:
        raise ValueError("max_steps must be at least 1")

    started_at, clock = time.time(), time.perf_counter()
    episode = Episode(
        key=episode_key(session.env, session.scenario, mode, session.seed), env=session.env,
        scenario=session.scenario, split=split, seed=session.seed, mode=mode,
        policy=policy_name or getattr(policy, "model", None) or getattr(policy, "__name__", None)
        or type(policy).__name__, task=task, session_id=session.id, tools=list(session.tools),
        user_turns=list(turns) if turns is not None else None,
        termination="completed", timings=Timings(started_at=started_at))
    turn_index = 0
    timings, usage = episode.timings, episode.usage

    async def user_turn(agent_text: str) -> bool:
        """Hand ``agent_text`` to the user; False when the user stops."""
        episode.user_messages.append({"role": "user", "content": agent_text})
        began = time.perf_counter()
        try:
            assert user is not None
            turn = await user.respond(episode.user_messages)
        except Exception as exc:  # noqa: BLE001 - any failure of the user's model ends it
            raise _Ended("user_error", _error("user", exc)) from exc
        finally:
            timings.user_s += time.perf_counter() - began
        usage.user.add(turn.usage)
        episode.user_messages.append({"role": "assistant", "content": turn.raw})
        if turn.stop:
            return False
        episode.messages.append({"role": "user", "content": turn.reply})
        return True

    try:
        if system_prompt is None:
            if env is None:
                try:
                    env = await session._client.env(session.env)
                except EnvScalerError as exc:
                    raise _Ended("gateway_error", _error("session", exc)) from exc
            system_prompt = agent_system_prompt(env.introduction, env.constraint_rules, mode)
        episode.messages.append({"role": "system", "content": system_prompt})
        if mode == CONVERSATION:
            assert user is not None
            episode.user_messages.append({"role": "system", "content": user.system_prompt(task)})
            if not await user_turn(USER_OPENING):
                raise _Ended("user_stop")
        else:
            episode.messages.append({"role": "user", "content": task})

        while True:
            if episode.steps >= limit:
                raise _Ended("max_steps")
            step = episode.steps + 1
            began = time.perf_counter()
            try:
                reply = await policy(list(episode.messages), list(episode.tools))
                message, turn_usage, finish_reason = normalize_reply(reply, step)
            except Exception as exc:  # noqa: BLE001 - the policy is the model: any failure
                raise _Ended("model_error", _error("agent", exc)) from exc
            finally:
                elapsed = time.perf_counter() - began
                timings.agent_s += elapsed
            episode.steps = step
            usage.agent.add(turn_usage)
            calls = message.get("tool_calls") or []
            episode.turns.append(TurnRecord(step=step, user_turn=turn_index,
                                            finish_reason=finish_reason,
                                            usage=turn_usage, tool_calls=len(calls),
                                            duration_s=round(elapsed, 6)))
            episode.messages.append(message)
            if calls:
                began = time.perf_counter()
                try:
                    for call in calls:  # every call of the turn, in order
                        try:
                            tool_message, record = await execute_tool_call(session, call, step)
                        except EnvScalerError as exc:
                            raise _Ended("gateway_error", _error("tool", exc)) from exc
                        record.user_turn = turn_index
                        episode.messages.append(tool_message)
                        episode.tool_calls.append(record)
                finally:
                    timings.tools_s += time.perf_counter() - began
                continue
            if mode == NON_CONVERSATION:
                if turns is None or turn_index + 1 >= len(turns):
                    raise _Ended("completed")
                turn_index += 1
                episode.messages.append({"role": "user", "content": turns[turn_index]})
                continue
            content = message.get("content")
            if not await user_turn(content if isinstance(content, str) else ""):
                raise _Ended("user_stop")
    except _Ended as ended:
        episode.termination, episode.error = ended.termination, ended.error

    if validate:
        began = time.perf_counter()
        try:
            validation = await session.validate()
        except EnvScalerError as exc:
            episode.validation_error = _error("validate", exc)
            if exc.type != "NoChecklist" and episode.termination not in ERROR_TERMINATIONS:
                episode.termination, episode.error = "gateway_error", episode.validation_error
        else:
            episode.reward, episode.passed, episode.total = (validation.reward, validation.passed,
                                                             validation.total)
            episode.checks = [CheckRecord(**check.model_dump()) for check in validation.checks]
        timings.validate_s = time.perf_counter() - began
    timings.total_s = time.perf_counter() - clock
    for name in ("agent_s", "user_s", "tools_s", "validate_s", "total_s"):
        setattr(timings, name, round(getattr(timings, name), 6))
    return episode


__all__ = ["ERROR_TERMINATIONS", "NATURAL_ENDS", "TERMINATIONS", "CheckRecord", "Episode",
           "EpisodeError", "Termination", "Timings", "TokenUsage",
           "ToolCallRecord", "TurnRecord", "Usage", "episode_key", "execute_tool_call",
           "normalize_reply", "normalize_tool_calls", "run_episode"]
