"""The scenarios as the Task API of OpenEnv and ORS (the same API in both): ``GET {env}/splits``,
``POST {env}/tasks``, ``num_tasks``, ``task``, ``task_range``.

A split is a scenario split of the catalogue (``train``, ``rl``, ``eval``), typed as the protocols
type theirs (``train``, ``train``, ``test``). A task spec names its environment and scenario, and
a seed; it never carries the task's solution, checklist or initial state: a session opened from
it loads those in its sandbox.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envscaler.server.catalogue import ServedEnv
from envscaler.server.errors import invalid_request, invalid_request_from

SPLIT_TYPES = {"train": "train", "rl": "train", "eval": "test"}


class TaskSpec(BaseModel):
    """What a task spec may hold; ``env``, when given, must be the session's environment."""

    model_config = ConfigDict(extra="forbid")

    scenario: str = Field(min_length=1, max_length=200)
    env: str | None = Field(None, min_length=1, max_length=200)
    seed: int = Field(0, ge=0, le=2**63 - 1)


def task_spec(env: ServedEnv, scenario_id: str) -> dict[str, Any]:
    return {"env": env.id, "scenario": scenario_id, "seed": 0}


def parse_spec(env: ServedEnv, spec: Any, field: str = "task_spec") -> TaskSpec:
    """A task spec checked against ``env``: its scenario must exist (404 ``UnknownScenario``)."""
    try:
        parsed = TaskSpec.model_validate(spec)
    except ValidationError as exc:
        raise invalid_request_from(
            [{**e, "loc": (field, *e.get("loc", ()))} for e in exc.errors()]) from None
    if parsed.env is not None and parsed.env != env.id:
        raise invalid_request(f"the task spec is of environment {parsed.env!r}, the session's is "
                              f"{env.id!r}", field=f"{field}.env")
    env.scenario(parsed.scenario)
    return parsed


def scenario_ids(env: ServedEnv, split: str) -> list[str]:
    if split not in SPLIT_TYPES:
        raise invalid_request(f"no split {split!r}; the splits are {sorted(SPLIT_TYPES)}",
                              field="split")
    return [scenario.id for scenario in env.scenarios if scenario.split == split]


def task_at(env: ServedEnv, split: str, index: int) -> dict[str, Any]:
    ids = scenario_ids(env, split)
    if not -len(ids) <= index < len(ids):
        raise invalid_request(f"split {split!r} has {len(ids)} tasks; no index {index}",
                              field="index")
    return task_spec(env, ids[index])


class SplitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split: str = Field(max_length=100)


class TaskRequest(SplitRequest):
    index: int


class RangeRequest(SplitRequest):
    start: int | None = None
    stop: int | None = None


def task_router(env_of: Callable[..., Awaitable[ServedEnv]], env_in_path: bool) -> APIRouter:
    """The Task API, its environment given by the dependency ``env_of`` (which also
    authenticates); at ``/{env_name}/...`` when ``env_in_path``, else at bare paths."""
    router = APIRouter(include_in_schema=False)
    at = "/{env_name}" if env_in_path else ""

    @router.get(f"{at}/splits")
    async def splits(env: ServedEnv = Depends(env_of)) -> list[dict[str, str]]:
        return [{"name": name, "type": kind} for name, kind in SPLIT_TYPES.items()]

    @router.post(f"{at}/tasks")
    async def tasks(body: SplitRequest, env: ServedEnv = Depends(env_of)) -> dict[str, Any]:
        return {"tasks": [task_spec(env, i) for i in scenario_ids(env, body.split)],
                "env_name": env.id}

    @router.post(f"{at}/num_tasks")
    async def num_tasks(body: SplitRequest, env: ServedEnv = Depends(env_of)) -> dict[str, Any]:
        return {"num_tasks": len(scenario_ids(env, body.split))}

    @router.post(f"{at}/task")
    async def task(body: TaskRequest, env: ServedEnv = Depends(env_of)) -> dict[str, Any]:
        return {"task": task_at(env, body.split, body.index), "env_name": env.id}

    @router.post(f"{at}/task_range")
    async def task_range(body: RangeRequest, env: ServedEnv = Depends(env_of)) -> dict[str, Any]:
        ids = scenario_ids(env, body.split)[body.start:body.stop]
        return {"tasks": [task_spec(env, i) for i in ids], "env_name": env.id}

    return router
