"""The Open Reward Standard (``ors-sdk`` 0.1, ``openreward`` 0.1.167), at the gateway's root.

Their aiohttp clients resolve every path from the root, so the routes are there, authenticated by
``X-API-Key: <API key>``. An environment is named in the path (``/{env}/call``), or, on the bare
paths openreward sends when no variant is given (``/call``), by its ``X-Deployment`` header: so
ROLL's OpenReward env trains unchanged with the deployment set to an environment id.

- Catalogue: ``GET /list_environments``, the Task API (`envscaler.server.doors.tasks`), ``GET {env}/tools``:
  the environment's tools and ``submit``, which is also the ``terminal_tool`` (openreward's
  harnesses call it on a reply without a tool call; ROLL's calls it as any tool).
- Sessions, each named by its ``X-Session-ID``: ``POST /create_session`` mints one (server-sent
  events ``task_id`` then ``end``), ``POST /create`` opens its gateway session from a task spec or
  a split and index, ``POST /ping`` (every 10 s), ``GET {env}/task_tools``, ``GET {env}/prompt``,
  ``POST /delete`` (and ``/delete_session``) closes it.
- ``POST {env}/call {name, input}``: events ``task_id`` (the call's ``call_id``: a client that
  resumes with it gets the recorded answer, nothing runs twice), a comment every 10 s, then
  ``chunk``\\s and ``end`` with ``{"ok": true, "output": {blocks, metadata, reward, finished}}``.
  A tool's own failure is an output too (its error object as text, and in ``metadata.error``); a
  call the gateway refuses is ``{"ok": false, "error", "reason"}`` (``not_found``,
  ``input_validation``, ``episode_finished``), never an ``error`` event, on which openreward ends
  the session. ``submit`` answers the reward with ``finished: true`` and closes the session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from envscaler.common import jsoncodec
from envscaler.server.auth import Principal
from envscaler.server.catalogue import ServedEnv
from envscaler.server.doors import LAST, Door
from envscaler.server.doors.episodes import (
    SUBMIT,
    SUBMIT_DESCRIPTION,
    Bindings,
    Outcome,
    admin_caller,
    call,
    tools_with_submit,
)
from envscaler.server.doors.tasks import parse_spec, task_at, task_router
from envscaler.server.errors import invalid_request, session_expired
from envscaler.server.sessions import SessionService
from envscaler.server.store import Record

log = logging.getLogger("envscaler.server.doors.ors")

PING_SECONDS = 10.0
CHUNK_CHARS = 4096  # aiohttp reads an event's lines whole: each stays well under its 64 KiB
TERMINAL_TOOL = {"name": SUBMIT, "arg": None, "description": SUBMIT_DESCRIPTION}
# The gateway's error types of a refused call as ORS's reasons; any other is given none.
REASONS = {
    "UnknownTool": "not_found", "InvalidArguments": "input_validation",
    "InvalidRequest": "input_validation", "ArgumentsTooLarge": "input_validation",
    "JsonTooComplex": "input_validation", "SessionClosed": "episode_finished",
    "SessionExpired": "episode_finished",
}
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_RUNNING: set[asyncio.Task[dict[str, Any]]] = set()  # calls whose client may have left


def _bindings(request: Request) -> Bindings:
    return Bindings(request.app.state.redis, "ors", request.app.state.settings.record_ttl)


def _service(request: Request) -> SessionService:
    return request.app.state.service


async def _caller(request: Request) -> Principal:
    key = request.headers.get("x-api-key")
    authorization = f"Bearer {key}" if key else request.headers.get("authorization")
    return admin_caller(request.app.state.auth, authorization)


async def _env_in_path(request: Request, env_name: str,
                       _: Principal = Depends(_caller)) -> ServedEnv:
    return request.app.state.catalogue.env(env_name)


async def _env_deployed(request: Request, _: Principal = Depends(_caller)) -> ServedEnv:
    deployment = request.headers.get("x-deployment")
    if not deployment:
        raise invalid_request("name the environment: /{env}" + request.url.path
                              + ", or an X-Deployment header", field="X-Deployment")
    return request.app.state.catalogue.env(deployment)


def tool_specs(env: ServedEnv) -> dict[str, Any]:
    """The environment's tools and ``submit``, listed (ROLL's OpenReward env ends an episode only
    on a listed tool that answers ``finished``) and declared the terminal tool (openreward's
    harnesses call it on a reply without a tool call)."""
    return {"tools": tools_with_submit(env, "input_schema"), "terminal_tool": TERMINAL_TOOL}


async def _session(request: Request, env: ServedEnv, caller: Principal) -> Record:
    """The gateway session of ``X-Session-ID``, which must be of ``env``."""
    session_id = await _bindings(request).session(request.headers.get("x-session-id"))
    record = await _service(request).info(caller, session_id)
    if record.env != env.id:
        raise invalid_request(f"session {request.headers.get('x-session-id')!r} is of "
                              f"environment {record.env!r}, not {env.id!r}")
    return record


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=200)
    input: dict[str, Any] = Field(default_factory=dict)
    task_id: str | None = Field(None, min_length=1, max_length=200)


def env_router(env_of: Callable[..., Awaitable[ServedEnv]], env_in_path: bool) -> APIRouter:
    """A session's routes, its environment given by ``env_of`` (which also authenticates)."""
    router = APIRouter(include_in_schema=False)
    at = "/{env_name}" if env_in_path else ""

    @router.get(f"{at}/tools")
    async def tools(env: ServedEnv = Depends(env_of)) -> dict[str, Any]:
        return tool_specs(env)

    @router.get(f"{at}/task_tools")
    async def task_tools(request: Request, env: ServedEnv = Depends(env_of),
                         caller: Principal = Depends(_caller)) -> dict[str, Any]:
        await _session(request, env, caller)
        return tool_specs(env)

    @router.get(f"{at}/prompt")
    async def prompt(request: Request, env: ServedEnv = Depends(env_of),
                     caller: Principal = Depends(_caller)) -> list[dict[str, Any]]:
        record = await _session(request, env, caller)
        task = env.scenario(record.scenario).task if record.scenario else ""
        return [{"type": "text", "text": task, "detail": None}]

    @router.post(f"{at}/call")
    async def call_tool(body: ToolCall, request: Request, env: ServedEnv = Depends(env_of),
                        caller: Principal = Depends(_caller)) -> StreamingResponse:
        record = await _session(request, env, caller)
        if record.status == "expired":
            raise session_expired(f"session {record.id} expired after being idle; open a new "
                                  "one")
        call_id = body.task_id or Bindings.mint()
        work = _run(_service(request), caller, record.id, body, call_id)
        return StreamingResponse(_events(call_id, work), media_type="text/event-stream",
                                 headers=SSE_HEADERS)

    return router


async def _run(service: SessionService, caller: Principal, session_id: str, body: ToolCall,
               call_id: str) -> dict[str, Any]:
    """The call's ORS answer; ``submit`` closes the session once it has the reward."""
    outcome = await call(service, caller, session_id, body.name, body.input, call_id)
    if outcome.done:
        await service.delete(caller, session_id)
    return run_tool_output(outcome)


def run_tool_output(outcome: Outcome) -> dict[str, Any]:
    """An `Outcome` as ORS's ``RunToolOutput``."""
    error = outcome.error
    if error is not None and outcome.status != 200 and error["type"] != "Timeout":
        reason = REASONS.get(error["type"])
        return {"ok": False, "error": f"{error['type']}: {error['message']}",
                **({"reason": reason} if reason else {})}
    shown = outcome.result if error is None else error
    return {"ok": True, "output": {
        "blocks": [{"type": "text", "text": jsoncodec.dumps(shown), "detail": None}],
        "metadata": ({"error": error} if error is not None
                     else outcome.result if outcome.done else {}),
        "reward": outcome.reward, "finished": outcome.done}}


def _event(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


def chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` in pieces of about ``size``, none starting with a space: the client strips a
    data line's leading spaces."""
    pieces, start = [], 0
    while start < len(text):
        end = start + size
        while end < len(text) and text[end] in " \t":
            end += 1
        pieces.append(text[start:end])
        start = end
    return pieces or [""]


async def _events(task_id: str, work: Awaitable[dict[str, Any]]) -> AsyncIterator[bytes]:
    """``task_id``, a comment every `PING_SECONDS` while the call runs, then its answer. A
    client that leaves does not stop the call: it is recorded, and answered to a resume."""
    yield _event("task_id", task_id)
    task = asyncio.ensure_future(work)
    _RUNNING.add(task)  # held until done: the loop keeps only a weak reference to a task
    task.add_done_callback(_RUNNING.discard)
    while not task.done():
        await asyncio.wait({task}, timeout=PING_SECONDS)
        if not task.done():
            yield b": ping\n\n"
    try:
        answer = task.result()
    except Exception as exc:  # noqa: BLE001 - the stream must end with an answer
        log.error("ors call failed task_id=%s error=%r", task_id, exc, exc_info=exc)
        answer = {"ok": False, "error": "InternalError: internal error; the server log has the "
                  "details"}
    pieces = chunks(jsoncodec.dumps(answer))
    for piece in pieces[:-1]:
        yield _event("chunk", piece)
    yield _event("end", pieces[-1])


# ---------------------------------------------------------------- sessions


class CreateSessionBody(BaseModel):
    """``POST /create_session``: openreward may send environment overrides, which the gateway's
    sandboxes do not take."""

    model_config = ConfigDict(extra="forbid")
    env: dict[str, str] | None = Field(None, max_length=0)


class CreateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    env_name: str | None = Field(None, max_length=200)
    task_spec: dict[str, Any] | None = None
    split: str | None = Field(None, max_length=100)
    index: int | None = None
    secrets: dict[str, str] | None = None  # ORS's; the gateway's environments take none
    toolset_name: str | None = Field(None, max_length=0)

    @model_validator(mode="after")
    def _one_task(self) -> CreateBody:
        if (self.task_spec is None) == (self.split is None or self.index is None):
            raise ValueError("give either task_spec, or split and index")
        return self


router = APIRouter(include_in_schema=False)


@router.get("/list_environments")
async def list_environments(request: Request, _: Principal = Depends(_caller)) -> list[str]:
    return list(request.app.state.catalogue.envs)


@router.post("/create_session")
async def create_session(_body: CreateSessionBody | None = None,
                         _: Principal = Depends(_caller)) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        yield _event("task_id", Bindings.mint())
        yield _event("end", "")

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)


@router.post("/create")
async def create(body: CreateBody, request: Request,
                 caller: Principal = Depends(_caller)) -> dict[str, str]:
    handle = Bindings.check(request.headers.get("x-session-id"))
    env_id = body.env_name or request.headers.get("x-deployment")
    if not env_id:
        raise invalid_request("name the environment: env_name, or an X-Deployment header",
                              field="env_name")
    env = request.app.state.catalogue.env(env_id)
    spec = (parse_spec(env, body.task_spec) if body.task_spec is not None
            else parse_spec(env, task_at(env, body.split or "", body.index or 0)))
    service = _service(request)
    record, _env, _token, _task = await service.create(caller, env.id, spec.scenario, None,
                                                       spec.seed)
    if not await _bindings(request).bind(handle, record.id):
        await service.delete(caller, record.id)
        raise invalid_request(f"session {handle!r} exists already", field="X-Session-ID")
    log.info("ors session created sid=%s session=%s env=%s scenario=%s", handle, record.id,
             env.id, spec.scenario)
    return {"sid": handle}


@router.post("/ping")
async def ping(request: Request, caller: Principal = Depends(_caller)) -> dict[str, str]:
    """Keeps the session alive (it is activity); a finished one answers too, until the client
    leaves it: only an expired or unknown session fails the client's keep-alive."""
    session_id = await _bindings(request).session(request.headers.get("x-session-id"))
    service = _service(request)
    record = await service.info(caller, session_id)
    if record.status == "expired":
        raise session_expired(f"session {record.id} expired after being idle")
    if record.status == "active":
        await service.touch(caller, session_id)
    return {"status": "ok"}


async def _delete(request: Request, caller: Principal = Depends(_caller)) -> dict[str, str]:
    """Close the session of ``X-Session-ID``; idempotent, and a handle never created is none."""
    handle = Bindings.check(request.headers.get("x-session-id"))
    bindings = _bindings(request)
    session_id = await bindings.get(handle)
    if session_id is not None:
        await _service(request).delete(caller, session_id)
    return {"sid": handle}


router.add_api_route("/delete", _delete, methods=["POST"])
router.add_api_route("/delete_session", _delete, methods=["POST"])
router.include_router(task_router(_env_in_path, env_in_path=True))
router.include_router(task_router(_env_deployed, env_in_path=False))
router.include_router(env_router(_env_in_path, env_in_path=True))
router.include_router(env_router(_env_deployed, env_in_path=False))

DOOR = Door(name="ors", router=router, order=LAST)  # at the root, where ORS clients look
