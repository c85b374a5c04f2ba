"""verl's agent loop: one session per trajectory, its tools for the model, validate as the reward.

Register it with an agent loop config file (``actor_rollout_ref.rollout.agent
.agent_loop_config_path``)::

    - name: envscaler_agent
      _target_: envscaler_client.adapters.verl.EnvScalerAgentLoop
      url: http://127.0.0.1:8000        # optional: ENVSCALER_URL otherwise

and give each dataset row ``agent_name: envscaler_agent`` and ``extra_info.envscaler`` naming the
episode (`envscaler_client.adapters.rows.verl_rows` builds such rows).

Built on verl 0.9's published interfaces: ``ToolAgentLoop`` (``AgentLoopBase``) instantiated per
trajectory with ``run(sampling_params, **row) -> AgentLoopOutput``, whose ``reward_score`` verl
uses instead of a reward function when it is set; and ``BaseTool`` (``create``, ``execute``,
``calc_reward``, ``release``) for each of the session's tools. The loop opens the session, hands
its tools to ``ToolAgentLoop``'s own generation and tool-calling loop, validates, and closes the
session whatever happens.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from envscaler_client._protocol import connection_limits
from envscaler_client.adapters.rows import VERL_AGENT_NAME, VERL_ROW_KEY, gateway, verl_episode
from envscaler_client.aio import AsyncEnvClient, AsyncSession
from envscaler_client.tools import async_tool_message


class EnvScalerTool(BaseTool):
    """One tool of one session: ``execute`` calls it (a failure is a result the model reads),
    ``calc_reward`` validates the session. ``ToolAgentLoop`` creates and releases an instance
    around every call; the session outlives them (the agent loop closes it)."""

    def __init__(self, session: AsyncSession, tool: Mapping[str, Any]) -> None:
        # BaseTool.__init__ prints every schema it is given: a trajectory's worth of prints per
        # rollout. Its three attributes are set here instead.
        self.config: dict[str, Any] = {}
        self.tool_schema = OpenAIFunctionToolSchema.model_validate(tool)
        self.name = self.tool_schema.function.name
        self._session = session
        self._calls = itertools.count()

    async def create(self, instance_id: str | None = None,
                     **kwargs: Any) -> tuple[str, ToolResponse]:
        return instance_id or self._session.id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any],
                      **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        call = {"id": f"verl-{next(self._calls)}", "type": "function",
                "function": {"name": self.name, "arguments": parameters}}
        message = await async_tool_message(self._session, call)
        return ToolResponse(text=message["content"]), 0.0, {}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return (await self._session.validate()).reward

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Nothing to release per call: the session lives for the trajectory."""


@register(VERL_AGENT_NAME)
class EnvScalerAgentLoop(ToolAgentLoop):
    """``ToolAgentLoop`` over a session of the row's scenario; ``reward_score`` from validate."""

    def __init__(self, *args: Any, url: str | None = None, api_key: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gateway = gateway(url, api_key)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        episode = verl_episode(kwargs)
        # A client per trajectory: verl builds an agent loop per trajectory, and an httpx
        # client belongs to the event loop it was opened on. Its batch is one session, so one
        # connection: a turn's parallel tool calls queue here, not on the session's lock.
        async with AsyncEnvClient(*self._gateway, limits=connection_limits(1)) as client, \
                client.create_session(episode.env, episode.scenario, seed=episode.seed) as session:
            tools = [EnvScalerTool(session, tool) for tool in session.tools]
            self.tools = {tool.name: tool for tool in tools}
            self.tool_schemas = [tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True)
                                 for tool in tools]
            output = await super().run(sampling_params, **kwargs)
            validation = await session.validate()
        output.reward_score = validation.reward
        output.extra_fields[VERL_ROW_KEY] = {
            "session_id": session.id, "passed": validation.passed, "total": validation.total}
        return output
