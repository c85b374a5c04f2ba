"""Sessions: create, inspect, call tools, read state and trajectory, reset, validate, delete.

Agent tokens may use only ``GET /v1/sessions/{id}/tools`` and ``POST /v1/sessions/{id}/calls`` of
their own session; every other route depends on `envscaler.server.auth.admin`.
"""

from __future__ import annotations

from fastapi import APIRouter, Body, Depends, Path, Request

from envscaler.server import paths
from envscaler.server.auth import Principal, admin, principal
from envscaler.server.calls import answer_call
from envscaler.server.models import (
    CallRequest,
    CallResult,
    CreateSession,
    ForkRequest,
    ForkResult,
    ResetRequest,
    ResetResult,
    SessionClosed,
    SessionCreated,
    SessionInfo,
    SessionState,
    SessionTools,
    SnapshotTaken,
    Trajectory,
    Validation,
    error_responses,
)
from envscaler.server.responses import FastJSONResponse
from envscaler.server.sessions import SessionService
from envscaler.server.store import Record

router = APIRouter(prefix=paths.SESSIONS, tags=["sessions"])

SessionId = Path(
    description="Session id (URL-safe, from POST /v1/sessions)", min_length=1,
    max_length=paths.MAX_SESSION_ID_CHARS,
)


def service(request: Request) -> SessionService:
    return request.app.state.service


def _info(record: Record) -> SessionInfo:
    return SessionInfo(
        session_id=record.id,
        env=record.env,
        scenario=record.scenario,
        seed=record.seed,
        status=record.status,  # type: ignore[arg-type]
        epoch=record.epoch,
        step=record.step,
        calls=record.length,  # the trajectory's entries: its length in the record
        sandbox_id=(record.sandbox or {}).get("id"),
        owner=record.owner,
        created=record.created,
        updated=record.updated,
    )


@router.post(
    "",
    status_code=201,
    response_model=SessionCreated,
    summary="Create a session",
    description="Claims a sandbox, loads the environment at the scenario's initial state (or "
    "`init_config`) with `seed`, and returns the task, the tools and an agent token.",
    responses=error_responses(401, 403, 404, 413, 415, 422, 429, 500, 503, 504),
)
async def create_session(
    body: CreateSession, request: Request, caller: Principal = Depends(admin)
) -> SessionCreated:
    if body.snapshot is not None:
        opened = await service(request).open_snapshot(caller, body.snapshot, body.env)
        return _created(request, opened.record, opened.agent_token)
    record, _, token, _ = await service(request).create(
        caller, body.env, body.scenario, body.init_config, body.seed
    )
    return _created(request, record, token)


def _created(request: Request, record: Record, agent_token: str) -> SessionCreated:
    env = request.app.state.catalogue.env(record.env)
    return SessionCreated(
        session_id=record.id,
        env=record.env,
        scenario=record.scenario,
        seed=record.seed,
        task=env.scenario(record.scenario).task if record.scenario else None,
        tools=env.tools,
        agent_token=agent_token,
        status="active",
        created=record.created,
        epoch=record.epoch,
        step=record.step,
    )


@router.post(
    "/{session_id}/fork",
    status_code=201,
    response_model=ForkResult,
    summary="Open N sessions at exactly this session's point",
    description="Each new session has the parent's state, epoch, step, the current episode's "
    "trajectory, virtual clock and random state, so its next call answers as the parent's "
    "would; from then on each is independent, and the parent goes on. All or none are opened.",
    responses=error_responses(401, 403, 404, 409, 410, 415, 422, 429, 500, 503, 504),
)
async def fork_session(
    request: Request, body: ForkRequest = Body(default_factory=ForkRequest),
    session_id: str = SessionId, caller: Principal = Depends(admin),
) -> ForkResult:
    opened = await service(request).fork(caller, session_id, body.count)
    return ForkResult(parent=session_id,
                      sessions=[_created(request, o.record, o.agent_token) for o in opened])


@router.post(
    "/{session_id}/snapshot",
    status_code=201,
    response_model=SnapshotTaken,
    summary="Store this session's point; open sessions there later, on any gateway",
    responses=error_responses(401, 403, 404, 409, 410, 422, 500, 503, 504),
)
async def snapshot_session(
    request: Request, session_id: str = SessionId, caller: Principal = Depends(admin)
) -> SnapshotTaken:
    snapshot_id, ttl, record = await service(request).snapshot(caller, session_id)
    return SnapshotTaken(snapshot_id=snapshot_id, session_id=session_id, epoch=record.epoch,
                         step=record.step, expires_in=ttl)


@router.get(
    "/{session_id}",
    response_model=SessionInfo,
    summary="Status, step count and timestamps",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def get_session(
    request: Request, session_id: str = SessionId, caller: Principal = Depends(admin)
) -> SessionInfo:
    return _info(await service(request).info(caller, session_id))


@router.get(
    "/{session_id}/tools",
    response_model=SessionTools,
    summary="The session's tool schemas (agent tokens allowed)",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def get_tools(
    request: Request, session_id: str = SessionId, caller: Principal = Depends(principal)
) -> SessionTools:
    record, env = await service(request).tools(caller, session_id)
    return SessionTools(session_id=record.id, env=env.id, tools=env.tools,
                        next_seq=record.next_seq)


@router.post(
    f"/{{session_id}}/{paths.CALLS}",
    response_model=CallResult,
    summary="Call a tool (agent tokens allowed)",
    description="Tool errors answer 200 with `ok: false`. A repeated `call_id` returns the stored "
    "answer and executes nothing. Arguments are checked against the tool's schema "
    "before the sandbox sees them; rejected calls are not recorded.",
    responses=error_responses(401, 403, 404, 409, 410, 413, 415, 422, 429, 500, 503, 504),
)
async def call_tool(
    body: CallRequest,
    request: Request,
    session_id: str = SessionId,
    caller: Principal = Depends(principal),
) -> FastJSONResponse:
    # Most calls never get here: `envscaler.server.fastcall` answers the well-formed ones before
    # FastAPI's routing (with `answer_call` too); this route documents the endpoint and answers
    # the rest.
    return await answer_call(service(request), caller, session_id, body)


@router.get(
    "/{session_id}/state",
    response_model=SessionState,
    summary="The environment's current state",
    description="Works on expired and closed sessions too (rebuilt by replay on a temporary "
    "sandbox).",
    responses=error_responses(401, 403, 404, 409, 422, 429, 503, 504),
)
async def get_state(
    request: Request, session_id: str = SessionId, caller: Principal = Depends(admin)
) -> FastJSONResponse:
    record, state = await service(request).state(caller, session_id)
    # Encoded directly: a state of megabytes would cost its model's dump several times over.
    return FastJSONResponse({"session_id": record.id, "epoch": record.epoch,
                             "step": record.step, "state": state})


@router.get(
    "/{session_id}/trajectory",
    response_model=Trajectory,
    summary="Every call with its arguments and result, and reset markers",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def get_trajectory(
    request: Request, session_id: str = SessionId, caller: Principal = Depends(admin)
) -> Trajectory:
    record, entries = await service(request).trajectory(caller, session_id)
    return Trajectory.model_validate(
        {"session_id": record.id, "env": record.env, "epoch": record.epoch, "entries": entries}
    )


@router.post(
    "/{session_id}/reset",
    response_model=ResetResult,
    summary="Back to the scenario's initial state (or another scenario, seed or init_config)",
    description="Resets the live sandbox in place when it is healthy; starts a new epoch.",
    responses=error_responses(401, 403, 404, 409, 410, 413, 415, 422, 429, 500, 503, 504),
)
async def reset_session(
    request: Request,
    session_id: str = SessionId,
    body: ResetRequest | None = Body(None),
    caller: Principal = Depends(admin),
) -> ResetResult:
    body = body or ResetRequest()
    record, task, reused = await service(request).reset(
        caller, session_id, body.scenario, body.init_config, body.seed
    )
    return ResetResult(
        session_id=record.id,
        epoch=record.epoch,
        scenario=record.scenario,
        seed=record.seed,
        task=task,
        sandbox_reused=reused,
    )


@router.post(
    "/{session_id}/validate",
    response_model=Validation,
    summary="Run the scenario's check functions: reward = passed / total",
    description="Changes nothing. Works on active, expired and closed sessions.",
    responses=error_responses(401, 403, 404, 409, 422, 429, 500, 503, 504),
)
async def validate_session(
    request: Request, session_id: str = SessionId, caller: Principal = Depends(admin)
) -> Validation:
    return Validation.model_validate(await service(request).validate(caller, session_id))


@router.delete(
    "/{session_id}",
    response_model=SessionClosed,
    summary="End the session and kill its sandbox",
    description="Idempotent. The record and trajectory stay readable for the record TTL.",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def delete_session(
    request: Request, session_id: str = SessionId, caller: Principal = Depends(admin)
) -> SessionClosed:
    record = await service(request).delete(caller, session_id)
    return SessionClosed(session_id=record.id, status="closed")
