"""GEM environments (``gem-llm``) over the gateway, for ROLL's agentic pipeline.

    from envscaler_client.adapters.gem import register
    register(["library_loans"])          # gem's registry: envscaler:library_loans
    env = gem.make("envscaler:library_loans", scenario="library_loans-001")
    task, info = env.reset(seed=0)       # info["tools"]: the OpenAI function schemas
    observation, reward, terminated, truncated, info = env.step(model_reply)

ROLL steps its environments synchronously, one text action at a time, so this adapter uses the
synchronous client. A reply's Qwen3-style ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>`` blocks (several allowed) run in order, and the observation is their results, each
in a ``<tool_response>`` block as Qwen3's chat template renders tool messages; a refused or failed
call is its error object there (``{"error": {"type", "message"}}``), and the episode goes on. A
reply without a tool call ends the episode: the reward is the session's validation (passed
checks / total). So does the ``max_turns``-th reply, marked ``truncated``, with its reward too.

Each instance holds one session (`envscaler_client.adapters.slot`): opened by the first reset,
moved to the next scenario and seed in place by the later ones. Without ``scenario``, a reset
draws one of the environment's scenarios (of ``split``) with its seed.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from typing import Any

import gem
from gem.envs.registration import ENV_REGISTRY

from envscaler_client.adapters.rows import Episode, gateway
from envscaler_client.adapters.slot import SessionSlot
from envscaler_client.client import EnvClient, Session
from envscaler_client.rollout.prompts import agent_system_prompt
from envscaler_client.tools import tool_message

ENV_PREFIX = "envscaler:"
ENTRY_POINT = "envscaler_client.adapters.gem:EnvScalerGemEnv"
DEFAULT_MAX_TURNS = 30
TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def register(envs: Iterable[str] | None = None, *, url: str | None = None,
             api_key: str | None = None) -> list[str]:
    """Register ``envscaler:{env}`` with gem's registry for each of ``envs`` (default: every
    environment the gateway serves, which asks it) and return the ids; an id already registered
    is left as it is. ``url`` / ``api_key`` go into the registration only when given; otherwise
    each environment reads ``ENVSCALER_URL`` / ``ENVSCALER_API_KEY`` where it is made."""
    if envs is None:
        with EnvClient(*gateway(url, api_key)) as client:
            envs = [env.id for env in client.envs()]
    where = {key: value for key, value in (("url", url), ("api_key", api_key)) if value}
    ids = []
    for env in envs:
        env_id = ENV_PREFIX + env
        if env_id not in ENV_REGISTRY:
            gem.register(env_id, ENTRY_POINT, env=env, **where)
        ids.append(env_id)
    return ids


def tool_calls(reply: str) -> list[dict[str, Any] | str]:
    """The reply's ``<tool_call>`` blocks in order: each an OpenAI ``tool_calls`` item, or the
    reason it is not one (not JSON, not ``{"name": str, "arguments": object}``)."""
    calls: list[dict[str, Any] | str] = []
    for index, block in enumerate(TOOL_CALL.findall(reply)):
        try:
            value = json.loads(block)
        except ValueError as exc:
            calls.append(f"the tool call is not JSON: {exc}")
            continue
        name = value.get("name") if isinstance(value, dict) else None
        arguments = value.get("arguments", {}) if isinstance(value, dict) else None
        if not isinstance(name, str) or not name or not isinstance(arguments, dict | str):
            calls.append('a tool call must be {"name": "<tool>", "arguments": {...}}')
            continue
        calls.append({"id": f"gem-{index}", "type": "function",
                      "function": {"name": name, "arguments": arguments}})
    return calls


def _response(content: str) -> str:
    return f"<tool_response>\n{content}\n</tool_response>"


class EnvScalerGemEnv(gem.Env):
    """One environment of the gateway as a GEM environment (see the module's docstring)."""

    def __init__(self, env: str, scenario: str | None = None, split: str | None = None,
                 max_turns: int = DEFAULT_MAX_TURNS, url: str | None = None,
                 api_key: str | None = None, **_config: Any) -> None:
        super().__init__()
        self.env, self.scenario, self.split, self.max_turns = env, scenario, split, max_turns
        client = EnvClient(*gateway(url, api_key))
        self._slot = SessionSlot(client)
        detail = client.env(env)
        self.tools = detail.tools
        self.system_prompt = agent_system_prompt(detail.introduction, detail.constraint_rules)
        self._scenarios: list[str] | None = None
        self._turns = 0

    def reset(self, seed: int | None = None,
              scenario: str | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: the task, and ``info`` with the tools, the system prompt (the
        environment's introduction and rules) and the episode's scenario and seed."""
        super().reset(seed)
        seed = 0 if seed is None else seed
        episode = Episode(self.env, scenario or self.scenario or self._draw(seed), seed)
        session = self._slot.move_to(episode)
        self._turns = 0
        return session.task or "", {"tools": self.tools, "env_introduction": self.system_prompt,
                                    "env": self.env, "scenario": episode.scenario,
                                    "seed": seed, "session_id": session.id}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run the reply's tool calls; a reply without one (or the last turn) ends the episode
        with the reward."""
        session = self._slot.current(type(self).__name__)
        self._turns += 1
        calls = tool_calls(action)
        if not calls:
            return "", self._reward(session), True, False, {"tool_calls": 0}
        responses = [_response(tool_message(session, call)["content"]) if isinstance(call, dict)
                     else _response(json.dumps({"error": {"type": "InvalidToolCall",
                                                          "message": call}}))
                     for call in calls]
        observation = "\n".join(responses)
        if self._turns >= self.max_turns:
            return observation, self._reward(session), False, True, {"tool_calls": len(calls)}
        return observation, 0.0, False, False, {"tool_calls": len(calls)}

    def close(self) -> None:
        """Close the session now rather than when the environment is collected."""
        self._slot.close()

    def _reward(self, session: Session) -> float:
        return session.validate().reward

    def _draw(self, seed: int) -> str:
        """A scenario of the environment (of ``split``), drawn with ``seed``."""
        if self._scenarios is None:
            self._scenarios = [scenario.id for scenario in
                               self._slot.client.scenarios(self.env, self.split)]
        if not self._scenarios:
            raise ValueError(f"{self.env} has no scenarios"
                             + (f" in split {self.split!r}" if self.split else ""))
        return random.Random(seed).choice(self._scenarios)
