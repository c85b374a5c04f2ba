"""What the benchmark sends, taken from the catalogue's files (read, never executed): for each
environment a probe call (a read-only tool with arguments from a reference solution, so that
repeating it changes nothing) and the scenarios whose reference solutions drive the rollouts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envformat.loader import EnvPackage, load_catalogue


@dataclass(frozen=True)
class Probe:
    env: str
    scenario: str
    tool: str
    arguments: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return {"name": self.tool, "arguments": self.arguments}


@dataclass(frozen=True)
class Episode:
    env: str
    scenario: str
    solution: list[dict[str, Any]]


def load_envs(catalogue: Path, env_ids: tuple[str, ...]) -> dict[str, EnvPackage]:
    envs = load_catalogue(catalogue, strict=True).envs
    missing = [env_id for env_id in env_ids if env_id not in envs]
    if missing:
        raise SystemExit(f"not in the catalogue {catalogue}: {', '.join(missing)}")
    return {env_id: envs[env_id] for env_id in env_ids}


def probe(env: EnvPackage) -> Probe:
    """A read-only call: the first query-type call of a scenario's solution, or else the first
    query tool whose required arguments all appear (by name) in that solution's calls."""
    kinds = {op.name: op.type for op in env.manifest.operations}
    for scenario in env.scenarios:
        calls = scenario.solution or []
        for call in calls:
            if kinds.get(call.name) == "query":
                return Probe(env.manifest.id, scenario.id, call.name, dict(call.arguments))
        known: dict[str, Any] = {}
        for call in calls:
            for name, value in call.arguments.items():
                known.setdefault(name, value)
        for name in env.tool_names:
            schema = (env.tool(name) or {}).get("function", {}).get("parameters", {})
            required = schema.get("required", [])
            if kinds.get(name) == "query" and required and all(r in known for r in required):
                return Probe(env.manifest.id, scenario.id, name, {r: known[r] for r in required})
    raise SystemExit(f"{env.manifest.id}: no read-only call can be made from its solutions")


def episodes(envs: dict[str, EnvPackage], count: int) -> list[Episode]:
    """``count`` episodes cycling over every scenario (with a solution) of ``envs``."""
    pool = [Episode(env.manifest.id, s.id, [{"name": c.name, "arguments": dict(c.arguments)}
                                            for c in s.solution])
            for env in envs.values() for s in env.scenarios if s.solution and s.checklist]
    if not pool:
        raise SystemExit("no scenario with a solution and a checklist to roll out")
    return [pool[i % len(pool)] for i in range(count)]
