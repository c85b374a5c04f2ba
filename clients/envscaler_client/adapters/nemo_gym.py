"""NeMo Gym's dataset rows for the gateway's NeMo Gym door (``/nemo-gym/{env_id}``).

A NeMo Gym row holds ``responses_create_params`` (what its agent sends the model: the input
messages and the tools, in the Responses API's shape) and whatever its resources server reads
at ``/seed_session``: here ``env``, ``scenario`` and ``seed``. ``agent_ref`` routes a row to a
configured agent when NeMo Gym collects rollouts over several. ``envscaler export nemo-gym``
writes them as JSONL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envscaler_client.adapters.rows import gateway, scenario_rows
from envscaler_client.client import EnvClient


def responses_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions function schemas (the gateway's) as the Responses API's function tools;
    ``strict`` is off, since a strict schema must list every property as required."""
    return [{"type": "function", "name": function["name"],
             "description": function.get("description") or "",
             "parameters": function.get("parameters") or {"type": "object", "properties": {}},
             "strict": False}
            for function in (tool.get("function", tool) for tool in tools)]


def nemo_gym_rows(env: str, split: str | None = None, seeds: int = 1, *,
                  agent: str | None = None, url: str | None = None,
                  api_key: str | None = None) -> list[dict[str, Any]]:
    """One NeMo Gym row per scenario of ``env`` (of ``split``) and seed in ``range(seeds)``,
    with the rollout runner's prompt; ``agent``: the ``agent_ref`` name of every row."""
    url, api_key = gateway(url, api_key)
    with EnvClient(url, api_key) as client:
        tools = responses_tools(client.env(env).tools)
    rows = []
    for row in scenario_rows(env, split, seeds, url=url, api_key=api_key):
        nemo_row: dict[str, Any] = {
            "responses_create_params": {"input": row["prompt"], "tools": tools},
            "env": row["env"], "scenario": row["scenario"], "seed": row["seed"]}
        if agent is not None:
            nemo_row["agent_ref"] = {"type": "responses_api_agents", "name": agent}
        rows.append(nemo_row)
    return rows
