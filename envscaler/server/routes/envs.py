"""The catalogue: environments, their tools and their scenarios (never checks or solutions)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request

from envscaler.server.auth import Principal, admin
from envscaler.server.models import (
    EnvDetail,
    EnvList,
    EnvSummary,
    ScenarioDetail,
    ScenarioList,
    ScenarioSummary,
    error_responses,
)

router = APIRouter(prefix="/v1/envs", tags=["environments"])


@router.get(
    "",
    response_model=EnvList,
    summary="The catalogue: id, summary, tool and scenario counts",
    responses=error_responses(401, 403),
)
async def list_envs(request: Request, _: Principal = Depends(admin)) -> EnvList:
    catalogue = request.app.state.catalogue
    return EnvList(
        envs=[
            EnvSummary(
                id=env.id,
                summary=env.manifest.summary,
                tools=len(env.tools),
                scenarios=len(env.scenarios),
            )
            for env in catalogue.envs.values()
        ]
    )


@router.get(
    "/{env}",
    response_model=EnvDetail,
    summary="An environment's metadata and tool schemas",
    responses=error_responses(401, 403, 404, 422),
)
async def get_env(env: str, request: Request, _: Principal = Depends(admin)) -> EnvDetail:
    served = request.app.state.catalogue.env(env)
    manifest = served.manifest.model_dump(mode="json")
    return EnvDetail(
        id=served.id,
        class_name=manifest["class_name"],
        summary=manifest["summary"],
        introduction=manifest["introduction"],
        state_space=manifest.get("state_space"),
        constraint_rules=manifest.get("constraint_rules"),
        operations=manifest.get("operations"),
        tools=served.tools,
        provenance=manifest.get("provenance"),
        clock_start=manifest.get("clock_start"),
        scenarios=len(served.scenarios),
    )


@router.get(
    "/{env}/scenarios",
    response_model=ScenarioList,
    response_model_exclude_none=True,  # turns: only multi-turn scenarios have them
    summary="Scenario ids, splits and tasks (never the checks or solutions)",
    responses=error_responses(401, 403, 404, 422),
)
async def list_scenarios(
    env: str,
    request: Request,
    split: Literal["train", "rl", "eval"] | None = Query(None, description="Only this split"),
    _: Principal = Depends(admin),
) -> ScenarioList:
    served = request.app.state.catalogue.env(env)
    return ScenarioList(
        env=served.id,
        scenarios=[
            ScenarioSummary(id=s.id, split=s.split, task=s.task, turns=user_turns(s))
            for s in served.scenarios
            if split is None or s.split == split
        ],
    )


@router.get(
    "/{env}/scenarios/{scenario}",
    response_model=ScenarioDetail,
    response_model_exclude_none=True,  # turns: only multi-turn scenarios have them
    summary="A scenario's task and checklist (never its solution)",
    description="For people who look at an environment before they train on it (the web page): "
    "the checklist items with their check sources. API keys only, like the whole catalogue; the "
    "reference solution stays in the catalogue files.",
    responses=error_responses(401, 403, 404, 422),
)
async def get_scenario(
    env: str, scenario: str, request: Request, _: Principal = Depends(admin)
) -> ScenarioDetail:
    served = request.app.state.catalogue.env(env)
    found = served.scenario(scenario)
    return ScenarioDetail.model_validate({
        "env": served.id, "id": found.id, "split": found.split, "task": found.task,
        "turns": user_turns(found), "verified": found.verified,
        "clock_start": served.clock_start(found.id),
        "checklist": [{"item": c.item, "check_func": c.check_func} for c in found.checklist],
    })


def user_turns(scenario: Any) -> list[str] | None:
    """The user's messages of a multi-turn scenario, never their reference calls."""
    return None if scenario.turns is None else [turn.user for turn in scenario.turns]
