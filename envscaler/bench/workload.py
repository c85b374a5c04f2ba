"""What the benchmark sends, taken from the catalogue's files (read, never executed): for each
environment a probe call (a read-only tool with arguments from a reference solution, so that
repeating it changes nothing), and the scenarios whose reference solutions drive the episodes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envscaler.format.loader import EnvPackage, load_catalogue


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


def load_envs(catalogue: Path, required: tuple[str, ...]) -> dict[str, EnvPackage]:
    """Every environment of the catalogue (the episodes use them all); ``required`` among them."""
    envs = load_catalogue(catalogue, strict=True).envs
    missing = [env_id for env_id in required if env_id not in envs]
    if missing:
        raise SystemExit(f"not in the catalogue {catalogue}: {', '.join(missing)}")
    return dict(envs)


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


def _episodes(env: EnvPackage) -> list[Episode]:
    """The scenarios of ``env`` that have a reference solution and checks."""
    return [Episode(env.manifest.id, s.id, [{"name": c.name, "arguments": dict(c.arguments)}
                                            for c in s.solution])
            for s in env.scenarios if s.solution and s.checklist]


def lanes(envs: dict[str, EnvPackage], count: int) -> list[list[Episode]]:
    """``count`` lanes (one concurrent trainer worker each), lane i on environment i mod n and
    cycling over its scenarios from its own offset, so that the lanes of one environment run
    different scenarios and every lane stays on one environment (it may reset to the next)."""
    pools = [pool for pool in map(_episodes, envs.values()) if pool]
    if not pools:
        raise SystemExit("no scenario with a solution and a checklist to run")
    out = []
    for index in range(count):
        pool = pools[index % len(pools)]
        start = index // len(pools)
        out.append([pool[(start + k) % len(pool)] for k in range(len(pool))])
    return out


def scenario_with_checks(env: EnvPackage, checks: int) -> Episode:
    """A scenario of ``env`` with exactly ``checks`` checklist items and a solution: validation
    latency grows with the number of checks, so the figure names it."""
    for episode in _episodes(env):
        scenario = env.scenario(episode.scenario)
        if scenario is not None and len(scenario.checklist) == checks:
            return episode
    raise SystemExit(f"{env.manifest.id}: no scenario with exactly {checks} checks and a solution")
