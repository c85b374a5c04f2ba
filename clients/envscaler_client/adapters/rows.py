"""Dataset rows naming an episode (environment, scenario, seed), shared by the trainer adapters.

A trainer's dataset row says which episode a rollout plays; the adapter opens (or resets) a
session on it. Rows built here also carry the prompt the rollout runner uses: the environment's
introduction and rules as the system message and the scenario's task as the user message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envscaler_client._protocol import DEFAULT_URL
from envscaler_client.client import EnvClient
from envscaler_client.rollout.prompts import agent_system_prompt

URL_VARIABLE = "ENVSCALER_URL"
API_KEY_VARIABLE = "ENVSCALER_API_KEY"
VERL_AGENT_NAME = "envscaler_agent"
VERL_ROW_KEY = "envscaler"
"""The key of a verl row's ``extra_info`` naming the episode (``env``, ``scenario``, ``seed``)."""


def gateway(url: str | None = None, api_key: str | None = None) -> tuple[str, str | None]:
    """The gateway to use: the arguments, else ``ENVSCALER_URL`` / ``ENVSCALER_API_KEY`` (as the
    ``envscaler`` command reads them), else the default URL without a key. Trainer workers are
    often configured through their environment, not through code."""
    return (url or os.environ.get(URL_VARIABLE) or DEFAULT_URL,
            api_key or os.environ.get(API_KEY_VARIABLE) or None)


@dataclass(frozen=True)
class Episode:
    """What a row asks for: a scenario of an environment, played with a seed."""

    env: str
    scenario: str
    seed: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Episode:
        """Read ``env``, ``scenario`` and ``seed`` (default 0) from a row, or say what is wrong:
        a trainer calls this with whatever its dataset holds."""
        env, scenario, seed = row.get("env"), row.get("scenario"), row.get("seed", 0)
        if not isinstance(env, str) or not env:
            raise ValueError(f"the row names no environment ('env'): {sorted(row)}")
        if not isinstance(scenario, str) or not scenario:
            raise ValueError(f"the row names no scenario ('scenario'): {sorted(row)}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"the row's 'seed' must be an integer, not {seed!r}")
        return cls(env, scenario, seed)

    def as_row(self) -> dict[str, Any]:
        return {"env": self.env, "scenario": self.scenario, "seed": self.seed}


def scenario_rows(env: str, split: str | None = None, seeds: int = 1, *,
                  url: str | None = None, api_key: str | None = None) -> list[dict[str, Any]]:
    """One row per scenario of ``env`` (of ``split``, when given) and seed in ``range(seeds)``:
    ``prompt`` (system: introduction and rules; user: the task), ``env``, ``scenario``, ``seed``.
    """
    with EnvClient(*gateway(url, api_key)) as client:
        detail = client.env(env)
        scenarios = client.scenarios(env, split)
    system = agent_system_prompt(detail.introduction, detail.constraint_rules)
    return [{"prompt": [{"role": "system", "content": system},
                        {"role": "user", "content": scenario.task}],
             **Episode(env, scenario.id, seed).as_row()}
            for scenario in scenarios for seed in range(seeds)]


def verl_episode(row: Mapping[str, Any]) -> Episode:
    """The episode a verl row names in ``extra_info.envscaler``."""
    extra_info = row.get("extra_info") or {}
    spec = extra_info.get(VERL_ROW_KEY) if isinstance(extra_info, Mapping) else None
    if not isinstance(spec, Mapping):
        raise ValueError(f"the row's extra_info has no {VERL_ROW_KEY!r} entry naming the episode "
                         "(env, scenario, seed): build rows with verl_rows")
    return Episode.from_row(spec)


def verl_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`scenario_rows` in verl's dataset shape: ``prompt``,
    ``data_source``, ``agent_name`` and ``extra_info.envscaler`` (write them to parquet)."""
    return [{"prompt": row["prompt"], "data_source": f"envscaler/{row['env']}",
             "agent_name": VERL_AGENT_NAME,
             "extra_info": {"index": index, VERL_ROW_KEY: Episode.from_row(row).as_row()}}
            for index, row in enumerate(rows)]
