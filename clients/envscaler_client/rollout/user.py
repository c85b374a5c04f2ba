"""The simulated user of conversation mode: itself a model, with its own endpoint and settings.

It holds the task and reveals it step by step; its replies are in ``# Thought`` / ``# Reply``
form (only the reply reaches the agent) and it ends the conversation with ``###STOP###``.
The ``tau`` style is tau-bench's user instead: tau's system prompt and greeting, one plain line a
reply, and each of the agent's messages to it also sent to the environment's ``respond`` tool,
where tau's reward looks for the outputs a task requires.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from envscaler_client.rollout.policy import ChatCompletionsPolicy, Message, Policy
from envscaler_client.rollout.prompts import (
    STOP_SIGNAL,
    TAU_USER_OPENING,
    USER_OPENING,
    tau_user_system_prompt,
    user_system_prompt,
)

UserStyle = Literal["envscaler", "tau"]
USER_STYLES: tuple[UserStyle, ...] = ("envscaler", "tau")
TAU_RELAY_TOOL = "respond"  # the tool of an imported tau-bench environment

_REPLY_HEADING = re.compile(r"^[ \t]*#+[ \t]*Reply[ \t]*:?[ \t]*$", re.IGNORECASE | re.MULTILINE)
_THOUGHT_HEADING = re.compile(r"^[ \t]*#+[ \t]*Thought[ \t]*:?[ \t]*$",
                              re.IGNORECASE | re.MULTILINE)


@dataclass
class UserTurn:
    """One reply of the simulated user: ``raw`` as the model wrote it, ``reply`` what the agent
    sees, ``stop`` when it contains the stop signal."""

    raw: str
    reply: str
    stop: bool
    usage: dict[str, Any] = field(default_factory=dict)


def parse_user_reply(raw: str, stop_signal: str = STOP_SIGNAL) -> tuple[str, bool]:
    """(what the agent sees, whether the user stopped) from a ``# Thought`` / ``# Reply`` text.

    Without a ``# Reply`` heading the whole text is the reply (minus a leading ``# Thought``
    section, which would otherwise leak the user's reasoning)."""
    stop = stop_signal in raw
    headings = list(_REPLY_HEADING.finditer(raw))
    if headings:
        reply = raw[headings[-1].end():]
    elif _THOUGHT_HEADING.search(raw):
        reply = ""
    else:
        reply = raw
    reply = reply.replace(stop_signal, "").strip()
    return reply, stop


class SimulatedUser:
    """The user of conversation mode.

    Either endpoint settings (``base_url``, ``model``, ``api_key``, ``temperature`` 0.7 as in
    the paper, ...) or any ``policy`` callable (``(messages, tools) -> message``) as the model.
    Stateless: `run_episode` keeps the user's side of each conversation, so one object serves
    many episodes at once.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, *, temperature: float | None = 0.7,
                 max_tokens: int | None = None, timeout: float = 300.0, attempts: int = 3,
                 backoff: float = 1.0, stop_signal: str = STOP_SIGNAL,
                 policy: Policy | None = None, style: UserStyle = "envscaler",
                 http_client: httpx.AsyncClient | None = None) -> None:
        if style not in USER_STYLES:
            raise ValueError(f"unknown user style {style!r}: choose from {USER_STYLES}")
        if policy is None:
            if not base_url or not model:
                raise ValueError("SimulatedUser needs base_url and model, or a policy")
            self._chat: ChatCompletionsPolicy | None = ChatCompletionsPolicy(
                base_url, model, api_key, temperature=temperature, max_tokens=max_tokens,
                timeout=timeout, attempts=attempts, backoff=backoff, http_client=http_client)
            policy = self._chat
        else:
            self._chat = None
        self.policy: Policy = policy
        self.stop_signal = stop_signal
        self.style = style

    @property
    def opening(self) -> str:
        """The agent's greeting that opens the user's side of the conversation."""
        return TAU_USER_OPENING if self.style == "tau" else USER_OPENING

    @property
    def relay_tool(self) -> str | None:
        """The environment's tool that receives each of the agent's messages to the user (when
        the session has it), so that checks see what the agent said."""
        return TAU_RELAY_TOOL if self.style == "tau" else None

    def system_prompt(self, task: str) -> str:
        if self.style == "tau":
            return tau_user_system_prompt(task, self.stop_signal)
        return user_system_prompt(task, self.stop_signal)

    async def respond(self, messages: Sequence[Mapping[str, Any]]) -> UserTurn:
        """The user's next turn, given its side of the conversation (its system prompt, the
        agent's messages as ``user``, its own earlier replies as ``assistant``)."""
        answer = await self.policy(list(messages), [])  # type: ignore[arg-type]
        message: Message = {"content": answer} if isinstance(answer, str) else dict(answer)
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
        raw = message.get("content") or ""
        if not isinstance(raw, str):
            raw = str(raw)
        if self.style == "tau":  # tau's user writes its reply as it is
            reply, stop = raw.replace(self.stop_signal, "").strip(), self.stop_signal in raw
        else:
            reply, stop = parse_user_reply(raw, self.stop_signal)
        return UserTurn(raw=raw, reply=reply, stop=stop, usage=usage or {})

    async def aclose(self) -> None:
        if self._chat is not None:
            await self._chat.aclose()

    async def __aenter__(self) -> SimulatedUser:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
