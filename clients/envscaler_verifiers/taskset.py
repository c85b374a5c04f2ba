"""EnvScaler scenarios as a verifiers (v1) taskset: one task per scenario and seed.

- ``load()`` reads the environment's scenarios (of ``split``) from the gateway; each task's
  prompt is the scenario's task, its system prompt the environment's introduction and rules
  (the rollout runner's, `envscaler_client.rollout.prompts`). No task carries a solution.
- ``setup`` opens a session on the task's scenario and seed; the rollout's state holds its MCP
  URL (``/v1/sessions/{id}/mcp``) and agent token.
- The tools: `EnvScalerToolset`, the taskset's shared tool server, lists and calls the
  session's tools through verifiers' MCP helper (``mcp_client``) against the gateway's MCP door,
  as verifiers' own NeMo Gym taskset bridges its servers. A refused call is an ``isError``
  result with the gateway's error object, and the rollout goes on.
- ``score()``: the ``envscaler`` reward validates the session (passed checks / total), then
  closes it.
- ``validate`` (``vf-validate``'s gold check) plays the scenario's reference solution through
  the same MCP helper and validates, when ``task.references`` names a catalogue (the checkout's
  ``generated_envs/``); without it there is no model-free check.

The gateway: ``task.url`` (default ``ENVSCALER_URL``) and the API key in the variable that
``task.api_key_var`` names (default ``ENVSCALER_API_KEY``), never in the config, which verifiers
writes out with each run.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import verifiers.v1 as vf
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, Tool
from pydantic import Field
from verifiers.v1.harnesses.utils.mcp import mcp_client
from verifiers.v1.mcp import SharedToolsetConfig, Toolset

from envscaler_client import AsyncEnvClient, EnvClient
from envscaler_client.adapters.rows import API_KEY_VARIABLE, gateway
from envscaler_client.rollout.prompts import agent_system_prompt
from envscaler_client.rollout.reference import load_references

MCP_PATH = "/v1/sessions/{session_id}/mcp"
SOLVED = 1.0


class EnvScalerState(vf.State):
    """The rollout's session, shared by the task's hooks and the tool server."""

    session_id: str = ""
    mcp_url: str = ""
    agent_token: str = ""
    request_timeout: float = 60.0

    def mcp_spec(self) -> dict[str, Any]:
        """The session's MCP door, as verifiers' ``mcp_client`` takes it."""
        if not self.mcp_url:
            raise RuntimeError("the rollout has no EnvScaler session: the task's setup opens it")
        return {"url": self.mcp_url, "headers": {"Authorization": f"Bearer {self.agent_token}"},
                "timeout": self.request_timeout, "connect_timeout": self.request_timeout}


async def session_tools(state: EnvScalerState) -> list[Tool]:
    """The session's tools, as its MCP door lists them."""
    async with mcp_client(state.mcp_spec()) as client:
        return list((await client.list_tools()).tools)


async def call_session_tool(state: EnvScalerState, name: str,
                            arguments: dict[str, Any]) -> CallToolResult:
    """One tool call through the session's MCP door (a refusal is an ``isError`` result)."""
    async with mcp_client(state.mcp_spec()) as client:
        return await client.call_tool(name, arguments)


class EnvScalerToolset(Toolset[SharedToolsetConfig, EnvScalerState]):
    """The rollout's session tools, under their own names."""

    TOOL_PREFIX = None

    def register(self, mcp: MCPServer) -> None:
        # MCPServer's handlers call these methods: each rollout sees its own session's tools.
        server = cast(Any, mcp)
        server.list_tools = self._with_state(self.list_tools)
        server.call_tool = self._with_state(self.call_tool)

    async def list_tools(self) -> list[Tool]:
        return await session_tools(self.state)

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context | None = None) -> CallToolResult:
        return await call_session_tool(self.state, name, arguments)


class EnvScalerTaskConfig(vf.TaskConfig):
    url: str | None = None
    """The gateway (default: ``ENVSCALER_URL``, else the local default)."""
    api_key_var: str = API_KEY_VARIABLE
    """The environment variable holding the gateway's API key."""
    references: Path | None = None
    """A catalogue whose reference solutions the gold check plays (``vf-validate``)."""
    request_timeout: float = Field(60.0, gt=0)
    """Seconds per MCP request."""


class EnvScalerConfig(vf.TasksetConfig):
    env: str = ""
    """The environment (``envscaler envs`` lists them); required, but defaulted because
    verifiers' command line builds the config from the taskset id alone first."""
    split: str | None = None
    """Only the scenarios of this split (train, rl, eval)."""
    seeds: int = Field(1, ge=1)
    """Tasks per scenario, with seeds 0..seeds-1."""
    tools: SharedToolsetConfig = SharedToolsetConfig()
    task: EnvScalerTaskConfig = EnvScalerTaskConfig()


class EnvScalerData(vf.TaskData):
    env: str
    scenario: str
    seed: int = 0


class EnvScalerTask(vf.Task[EnvScalerData, EnvScalerState, EnvScalerTaskConfig]):
    def _gateway(self) -> tuple[str, str | None]:
        return gateway(self.config.url, os.environ.get(self.config.api_key_var))

    @property
    def key(self) -> str:
        return f"{self.data.scenario}@{self.data.seed}"

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        url, api_key = self._gateway()
        async with AsyncEnvClient(url, api_key) as client:
            session = await client.create_session(self.data.env, self.data.scenario,
                                                  seed=self.data.seed)
        state = cast(EnvScalerState, trace.state)
        state.session_id, state.agent_token = session.id, session.agent_token or ""
        state.mcp_url = url.rstrip("/") + MCP_PATH.format(session_id=session.id)
        state.request_timeout = self.config.request_timeout
        _OPENED[runtime] = state

    @vf.reward(weight=1.0)
    async def envscaler(self, trace: vf.Trace) -> float:
        """The scenario's checks on the session's state: passed / total."""
        return await self._score(cast(EnvScalerState, trace.state))

    async def validate(self, runtime: vf.Runtime) -> bool | None:
        """Play the reference solution in the session ``setup`` opened on ``runtime``; valid
        when it reaches reward 1.0. None without ``references`` or a solution."""
        state = _OPENED.pop(runtime, None)
        if self.config.references is None or state is None:
            return None
        turns = load_references(self.config.references, self.data.env).get(self.data.scenario)
        if not turns:
            return None
        for call in (call for turn in turns for call in turn):
            result = await call_session_tool(state, call["name"], call.get("arguments") or {})
            if result.is_error:
                return False
        return await self._score(state) >= SOLVED

    async def _score(self, state: EnvScalerState) -> float:
        """Validate the session, then close it (its record and trajectory stay readable)."""
        async with AsyncEnvClient(*self._gateway()) as client:
            session = await client.session(state.session_id)
            reward = (await session.validate()).reward
            await session.close()
        return reward


_OPENED: weakref.WeakKeyDictionary[vf.Runtime, EnvScalerState] = weakref.WeakKeyDictionary()
"""The session a task's setup opened, by runtime: ``vf-validate``'s gold check calls
``validate(runtime)`` after ``setup(trace, runtime)`` with no trace to read it from (weak: a
rollout's runtime, never validated, takes its entry with it)."""


class EnvScalerTaskset(vf.Taskset[EnvScalerTask, EnvScalerConfig]):
    @classmethod
    def toolsets(cls, config: EnvScalerConfig) -> list[Toolset]:
        return [EnvScalerToolset(config.tools)]

    def load(self) -> Iterator[EnvScalerTask]:
        if not self.config.env:
            raise ValueError("set the taskset's env (--taskset.env ENV): the environment whose "
                             "scenarios are the tasks")
        task = self.config.task
        with EnvClient(*gateway(task.url, os.environ.get(task.api_key_var))) as client:
            detail = client.env(self.config.env)
            scenarios = client.scenarios(self.config.env, self.config.split)
        system = agent_system_prompt(detail.introduction, detail.constraint_rules)
        for scenario in scenarios:
            for seed in range(self.config.seeds):
                yield EnvScalerTask(EnvScalerData(
                    id=f"{scenario.id}@{seed}", name=scenario.id, prompt=scenario.task,
                    system_prompt=system, env=self.config.env, scenario=scenario.id, seed=seed),
                    task)
