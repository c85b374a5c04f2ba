"""What `Session` and `AsyncSession` share: the session's data and read-only views of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envscaler_client.models import SessionCreated


@dataclass
class SessionData:
    """What a session object knows about its session; flows update it (reset, close)."""

    id: str
    env: str
    tools: list[dict[str, Any]]
    agent_token: str | None = None
    scenario: str | None = None
    seed: int | None = None
    task: str | None = None
    closed: bool = False
    next_seq: int = 0  # the ``seq`` of the episode's next ordered call made through this object

    def take_seq(self) -> int:
        """The next ``seq`` of the episode (see `envscaler_client._api.session_call`)."""
        seq = self.next_seq
        self.next_seq += 1
        return seq

    @classmethod
    def created(cls, answer: SessionCreated) -> SessionData:
        return cls(id=answer.session_id, env=answer.env, tools=answer.tools,
                   agent_token=answer.agent_token, scenario=answer.scenario, seed=answer.seed,
                   task=answer.task)


class SessionView:
    """Read-only attributes of a session object."""

    def __init__(self, data: SessionData) -> None:
        self._data = data

    @property
    def id(self) -> str:
        return self._data.id

    @property
    def env(self) -> str:
        return self._data.env

    @property
    def task(self) -> str | None:
        """The scenario's task; None for a custom ``init_config`` or an agent token's attach."""
        return self._data.task

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools in OpenAI function format, ready for a chat-completions ``tools=``."""
        return self._data.tools

    @property
    def agent_token(self) -> str | None:
        """A token that may only list and call this session's tools: hand it to the agent, not
        the API key. Tool calls of this object use it when known."""
        return self._data.agent_token

    @property
    def scenario(self) -> str | None:
        return self._data.scenario

    @property
    def seed(self) -> int | None:
        return self._data.seed

    @property
    def closed(self) -> bool:
        return self._data.closed

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (f"{type(self).__name__}(id={self.id!r}, env={self.env!r}, "
                f"scenario={self.scenario!r}, {state})")
