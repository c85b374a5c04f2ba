"""NeMo Gym: each environment as a NeMo Gym resources server at ``/nemo-gym/{env_id}``.

NeMo Gym's agents (its ``simple_agent`` and every agent built like it) drive a resources server
over plain HTTP with JSON bodies, carrying the rollout's session in a cookie that the server set
at ``/seed_session``:

- ``POST /seed_session`` with a dataset row naming the scenario and seed (``scenario``,
  ``seed``; ``env`` too, when present, must be this door's) opens a session
  (`envscaler.server.sessions.SessionService.create`) and sets the cookie ``envscaler_session`` to the
  session's agent token: a credential the session layer checks against the session's record on
  every use, so the cookie cannot be forged or moved to another session.
- ``POST /{tool}`` with the tool's arguments is the REST tool call (`SessionService.call`, its
  deadline as `envscaler.server.calls.checked` answers it): the answer is the tool's result, a
  tool's own failure is ``{"ok": false, "error"}`` (200, as on REST), and a refusal answers the
  REST status and error object (an unknown tool 404 ``UnknownTool``, bad arguments 422
  ``InvalidArguments``); the session goes on.
- ``POST /verify`` with the row and the agent's response validates the session (reward = passed
  checks / total), answers the request with ``reward`` (and the checks under ``envscaler``), and
  closes the session: NeMo Gym's legacy rollout (seed, responses, verify) never closes one.
- ``POST /close_session`` closes the cookie's session (idempotent), ``POST /aggregate_metrics``
  summarises verify responses, ``GET /reverify_mode`` answers ``unsupported`` (a reward needs the
  session's final state, which is gone once it closes).

Every route needs the caller's ``Authorization: Bearer <API key>`` (an admin, as on REST), and
every session operation runs under the cookie's agent principal, so the session layer's
isolation, idempotency, limits, quotas and trajectory are those of REST.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Body, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from envscaler.server.auth import Principal, admin, agent_principal
from envscaler.server.calls import checked
from envscaler.server.doors import Door
from envscaler.server.doors.episodes import tool_call
from envscaler.server.errors import invalid_request, unauthorized
from envscaler.server.models import MAX_CALL_FIELD_CHARS, error_responses
from envscaler.server.responses import FastJSONResponse
from envscaler.server.routes.sessions import service

PREFIX = "/nemo-gym/{env_id}"
ROUTES = frozenset({"seed_session", "verify", "close_session", "aggregate_metrics",
                    "reverify_mode"})
"""The door's own routes; any other ``{PREFIX}/{name}`` is a tool call."""
COOKIE = "envscaler_session"
TASK_INDEX = "_ng_task_index"  # NeMo Gym's key of a verify response's task
REVERIFY_MODE = "unsupported"

router = APIRouter(prefix=PREFIX, tags=["nemo-gym"], dependencies=[Depends(admin)])
EnvId = Path(description="Environment id", min_length=1, max_length=200)
ToolName = Path(description="Tool name", min_length=1, max_length=MAX_CALL_FIELD_CHARS)


class SeedRow(BaseModel):
    """The part of a NeMo Gym dataset row this door reads; its other keys (the
    ``responses_create_params`` the agent sends its model, ``agent_ref``, ...) pass by."""

    model_config = ConfigDict(extra="allow")

    env: str | None = Field(None, min_length=1, max_length=200)
    scenario: str = Field(min_length=1, max_length=200)
    seed: int = Field(0, ge=0, le=2**63 - 1)


class AggregateRequest(BaseModel):
    verify_responses: list[dict[str, Any]]


def is_tool_path(path: str) -> bool:
    """A tool call's path on this door: it gets a tool call's body limits
    (`envscaler.server.limits.BodyLimit`), as on REST."""
    parts = path.split("/")
    return (len(parts) == 4 and parts[1] == PREFIX.split("/")[1] and bool(parts[2])
            and bool(parts[3]) and parts[3] not in ROUTES)


def session_agent(request: Request) -> Principal:
    """The agent principal of the request's session cookie; the session layer checks its token
    against the session's record at each operation."""
    cookie = request.cookies.get(COOKIE)
    agent = agent_principal(cookie) if cookie else None
    if agent is None or agent.session_id is None:
        raise unauthorized(f"no valid {COOKIE} cookie: POST /seed_session first and send back "
                           "the cookie it set")
    return agent


@router.post("/seed_session", summary="Open a session on the row's scenario and seed",
             responses=error_responses(401, 403, 404, 413, 415, 422, 429, 500, 503, 504))
async def seed_session(request: Request, row: SeedRow, env_id: str = EnvId,
                       caller: Principal = Depends(admin)) -> FastJSONResponse:
    if row.env is not None and row.env != env_id:
        raise invalid_request(f"the row's env {row.env!r} is not {env_id!r}, this server's",
                              field="body.env")
    record, _env, token, _task = await service(request).create(
        caller, env_id, row.scenario, None, row.seed)
    response = FastJSONResponse({"session_id": record.id, "env": record.env,
                                 "scenario": record.scenario, "seed": record.seed})
    response.set_cookie(COOKIE, token, path=PREFIX.format(env_id=env_id), httponly=True,
                        samesite="strict")
    return response


@router.post("/verify", summary="Validate the session (reward = passed / total) and close it",
             responses=error_responses(401, 403, 404, 409, 422, 429, 500, 503, 504))
async def verify(request: Request, body: dict[str, Any] = Body(...)) -> FastJSONResponse:
    agent = session_agent(request)
    sessions = service(request)
    validation = await sessions.validate(agent, agent.session_id)
    await sessions.delete(agent, agent.session_id)
    checks = {key: validation[key] for key in ("session_id", "scenario", "passed", "total",
                                               "checks")}
    return FastJSONResponse({**body, "reward": validation["reward"], "envscaler": checks})


@router.post("/close_session", summary="Close the session (idempotent)",
             responses=error_responses(401, 403, 404, 422, 503))
async def close_session(request: Request,
                        _body: dict[str, Any] | None = Body(None)) -> dict[str, str]:
    agent = session_agent(request)
    record = await service(request).delete(agent, agent.session_id)
    return {"resources_session_id": record.id}


@router.post("/aggregate_metrics", summary="Reward statistics of verify responses, per task")
async def aggregate_metrics(body: AggregateRequest) -> dict[str, Any]:
    return aggregate(body.verify_responses)


@router.get("/reverify_mode", summary="Whether a verify can be repeated from its request alone")
async def reverify_mode() -> str:
    return REVERIFY_MODE


@router.post("/{tool}", summary="Call a tool with its arguments (the JSON body)",
             responses=error_responses(401, 403, 404, 409, 410, 413, 415, 422, 429, 500, 503,
                                       504))
async def call_tool(request: Request, arguments: dict[str, Any] = Body(...),
                    tool: str = ToolName) -> FastJSONResponse:
    agent = session_agent(request)
    call = tool_call(tool, arguments)
    outcome = await service(request).call(agent, agent.session_id, call.name, call.arguments,
                                          None)
    body = checked(outcome).body()
    return FastJSONResponse(body["result"] if body["ok"] else
                            {"ok": False, "error": body["error"]})


def _stats(rewards: Sequence[float]) -> dict[str, float | int]:
    return {"mean/reward": sum(rewards) / len(rewards), "max/reward": max(rewards),
            "min/reward": min(rewards), "pass@1/reward_1": sum(r >= 1.0 for r in rewards)
            / len(rewards), "count": len(rewards)}


def aggregate(verify_responses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """NeMo Gym's ``AggregateMetrics`` of verify responses: per task (``_ng_task_index``) and
    overall, the mean, max and min reward, the share of rewards of 1.0 and the count; responses
    without a numeric reward are left out."""
    by_task: dict[Any, list[float]] = defaultdict(list)
    for item in verify_responses:
        reward = item.get("reward")
        if isinstance(reward, int | float) and not isinstance(reward, bool):
            by_task[item.get(TASK_INDEX, 0)].append(float(reward))
    if not by_task:
        return {"group_level_metrics": [], "agent_metrics": {}, "key_metrics": {}}
    overall = _stats([reward for rewards in by_task.values() for reward in rewards])
    return {
        "group_level_metrics": [{TASK_INDEX: task, **_stats(rewards)}
                                for task, rewards in by_task.items()],
        "agent_metrics": overall,
        "key_metrics": {key: overall[key] for key in ("mean/reward", "pass@1/reward_1")},
    }


DOOR = Door(name="nemo_gym", router=router, call_path=is_tool_path)
