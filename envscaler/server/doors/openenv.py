"""OpenEnv (``openenv`` 0.10): each environment is an OpenEnv server at ``/openenv/{env_id}``.

What OpenEnv's own clients send and read (``MCPToolClient``, ``GenericEnvClient``), with
``Authorization: Bearer <API key>`` on HTTP and on the WebSocket upgrade:

- ``GET /health``; the Task API (`envscaler.server.doors.tasks`): ``GET /list_environments``,
  ``GET /{env}/splits``, ``POST /{env}/tasks`` ...
- ``POST /mcp``, JSON-RPC: ``openenv/session/create`` mints a session handle (no sandbox yet: the
  scenario is named at reset); ``tools/list``; ``tools/call`` with ``session_id``;
  ``openenv/session/close``. A refused or failed call answers a JSON-RPC error whose ``data`` is
  the gateway's error object; the session goes on.
- ``WS /ws`` (``?session_id=`` attaches to a handle of ``/mcp``): ``reset {scenario, seed}``
  opens the gateway session (or resets it: a new epoch) and observes the task; ``step`` with
  ``list_tools`` or ``call_tool`` observes the result, or ``{error_type, message}``; ``state``;
  ``close``. A WebSocket without a handle owns its session and closes it when it ends.

OpenEnv has no "reward now" call: the terminal tool ``submit`` answers ``done: true`` with the
reward of `SessionService.validate`. The reset observation has no ``tools`` or ``tool_name`` key,
which OpenEnv's client would take for a tool listing or a call's result.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envscaler.common import jsoncodec
from envscaler.server import jsonlimits
from envscaler.server.auth import Principal
from envscaler.server.catalogue import ServedEnv
from envscaler.server.doors import Door
from envscaler.server.doors.episodes import Bindings, admin_caller, call, tools_with_submit
from envscaler.server.doors.tasks import parse_spec, task_router
from envscaler.server.errors import ApiError, invalid_request_from, not_found
from envscaler.server.sessions import SessionService

log = logging.getLogger("envscaler.server.doors.openenv")

PREFIX = "/openenv/{env_id}"
ENDED = ("SessionClosed", "SessionExpired")  # a reset then opens a new session
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, SERVER_ERROR = (
    -32700, -32600, -32601, -32602, -32000)
# The gateway's error types as OpenEnv's ToolErrorType; any other is a "transport_error".
TOOL_ERROR_TYPES = {
    "UnknownTool": "tool_not_found", "InvalidArguments": "invalid_args",
    "InvalidRequest": "invalid_args", "ArgumentsTooLarge": "invalid_args",
    "JsonTooComplex": "invalid_args", "Timeout": "timeout", "ToolException": "execution_error",
    "ArgumentError": "execution_error", "ResultTooLarge": "execution_error",
    "SandboxCrashed": "execution_error",
}


def _bindings(app: Any) -> Bindings:
    return Bindings(app.state.redis, "openenv", app.state.settings.record_ttl)


async def _caller(request: Request) -> Principal:
    return admin_caller(request.app.state.auth, request.headers.get("authorization"))


async def _env(request: Request, env_id: str, _: Principal = Depends(_caller)) -> ServedEnv:
    return request.app.state.catalogue.env(env_id)


async def _task_env(env_name: str, env: ServedEnv = Depends(_env)) -> ServedEnv:
    """The Task API's ``{env}`` must be the environment this server is (as in OpenEnv's)."""
    if env_name != env.id:
        raise not_found("UnknownEnv", f"this OpenEnv server is {env.id!r}, not {env_name!r}")
    return env


router = APIRouter(prefix=PREFIX, include_in_schema=False)
router.include_router(task_router(_task_env, env_in_path=True))


@router.get("/health")
async def health(request: Request, env_id: str) -> dict[str, str]:
    request.app.state.catalogue.env(env_id)
    return {"status": "healthy"}


@router.get("/list_environments")
async def list_environments(env: ServedEnv = Depends(_env)) -> list[str]:
    return [env.id]


# ---------------------------------------------------------------- POST /mcp (JSON-RPC)


class RpcRequest(BaseModel):
    jsonrpc: Literal["2.0"]
    method: str = Field(max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    id: int | str | None = None


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ListParams(_Params):
    session_id: str | None = None
    cursor: str | None = None


class CallParams(_Params):
    name: str
    arguments: dict[str, Any] | str | None = None
    session_id: str
    meta: dict[str, Any] | None = Field(None, alias="_meta")


class CloseParams(_Params):
    session_id: str


def rpc_error(rpc_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rpc_id, "error": error}


def api_rpc_error(rpc_id: Any, error: dict[str, Any], status: int) -> dict[str, Any]:
    """The gateway's error object as a JSON-RPC error: the caller's fault is invalid params."""
    code = INVALID_PARAMS if status in (404, 413, 422) else SERVER_ERROR
    return rpc_error(rpc_id, code, f"{error['type']}: {error['message']}", error)


def _params(model: type[_Params], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise invalid_request_from(
            [{**e, "loc": ("params", *e.get("loc", ()))} for e in exc.errors()]) from None


@router.post("/mcp")
async def mcp(request: Request, env_id: str) -> dict[str, Any]:
    """Every answer is JSON-RPC, errors too (the caller's and the session's), so that OpenEnv's
    client raises the gateway's message rather than an HTTP status."""
    try:
        value = jsonlimits.loads(await request.body(), request.app.state.settings.json_limits())
    except ValueError as exc:
        return rpc_error(None, PARSE_ERROR, f"Parse error: {exc}")
    except ApiError as exc:
        return api_rpc_error(None, exc.body()["error"], exc.status)
    try:
        rpc = RpcRequest.model_validate(value)
    except ValidationError as exc:
        error = invalid_request_from(exc.errors())
        return rpc_error(value.get("id") if isinstance(value, dict) else None, INVALID_REQUEST,
                         error.message, error.body()["error"])
    try:
        caller = await _caller(request)
        env = await _env(request, env_id, caller)
        return await _rpc(request.app, caller, env, rpc)
    except ApiError as exc:
        return api_rpc_error(rpc.id, exc.body()["error"], exc.status)


async def _rpc(app: Any, caller: Principal, env: ServedEnv, rpc: RpcRequest) -> dict[str, Any]:
    service: SessionService = app.state.service
    bindings = _bindings(app)
    result: Any
    if rpc.method == "openenv/session/create":
        result = {"session_id": bindings.mint()}
    elif rpc.method == "openenv/session/close":
        handle = _params(CloseParams, rpc.params).session_id
        session_id = await bindings.get(handle)
        if session_id is not None:
            await service.delete(caller, session_id)
            await bindings.drop(handle)
        result = {"session_id": handle, "closed": True}
    elif rpc.method == "tools/list":
        _params(ListParams, rpc.params)
        result = {"tools": tools_with_submit(env, "inputSchema")}
    elif rpc.method == "tools/call":
        params = _params(CallParams, rpc.params)
        session_id = await _episode(bindings, params.session_id)
        call_id = (params.meta or {}).get("call_id")
        outcome = await call(service, caller, session_id, params.name, params.arguments, call_id)
        if outcome.error is not None:
            return api_rpc_error(rpc.id, outcome.error, outcome.status)
        result = {"content": [{"type": "text", "text": jsoncodec.dumps(outcome.result)}],
                  "structuredContent": outcome.result if isinstance(outcome.result, dict)
                  else None, "isError": False, "data": outcome.result}
    else:
        return rpc_error(rpc.id, METHOD_NOT_FOUND, f"Method not found: {rpc.method}")
    return {"jsonrpc": "2.0", "id": rpc.id, "result": result}


async def _episode(bindings: Bindings, handle: str) -> str:
    session_id = await bindings.get(handle)
    if session_id is None:
        raise not_found("UnknownSession", f"session {handle!r} has no episode: reset it over "
                        "/ws (with its scenario) first")
    return session_id


# ---------------------------------------------------------------- WS /ws


class ResetData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str = Field(min_length=1, max_length=200)
    seed: int = Field(0, ge=0, le=2**63 - 1)
    episode_id: str | None = Field(None, max_length=200)  # OpenEnv's; the session id is ours


class Message(BaseModel):
    type: str = Field(max_length=50)
    data: dict[str, Any] = Field(default_factory=dict)


class ListToolsAction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["list_tools"]


class CallToolAction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["call_tool"]
    tool_name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class WsError(Exception):
    """An error frame: ``{"type": "error", "data": {"message", "code", "error"?}}``."""

    def __init__(self, message: str, code: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.frame = {"type": "error", "data": {"message": message, "code": code,
                                                **({"error": error} if error else {})}}

    @classmethod
    def of(cls, exc: ApiError) -> WsError:
        error = exc.body()["error"]
        code = "VALIDATION_ERROR" if exc.status in (404, 413, 422) else "EXECUTION_ERROR"
        return cls(f"{error['type']}: {error['message']}", code, error)


def _model(model: type[BaseModel], data: Any, what: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise WsError.of(invalid_request_from(
            [{**e, "loc": (what, *e.get("loc", ()))} for e in exc.errors()])) from None


def _observation(observation: dict[str, Any], done: bool = False,
                 reward: float | None = None) -> dict[str, Any]:
    return {"type": "observation", "data": {"observation": {**observation, "metadata": {}},
                                            "reward": reward, "done": done, "metadata": {}}}


@dataclass
class Connection:
    """One WebSocket's episode: a session of its own, or the one bound to ``handle``."""

    service: SessionService
    bindings: Bindings
    caller: Principal
    env: ServedEnv
    handle: str | None
    session_id: str | None = None

    async def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        reset = _model(ResetData, data, "data")
        spec = parse_spec(self.env, {"scenario": reset.scenario, "seed": reset.seed}, "data")
        if self.handle is not None and self.session_id is None:
            self.session_id = await self.bindings.get(self.handle)
        record, task = None, None
        if self.session_id is not None:
            try:
                record, task, _reused = await self.service.reset(
                    self.caller, self.session_id, spec.scenario, None, spec.seed)
            except ApiError as exc:
                if exc.type not in ENDED:
                    raise
        if record is None:  # the first episode, or its session was closed or expired
            record, _env, _token, task = await self.service.create(
                self.caller, self.env.id, spec.scenario, None, spec.seed)
            await self._adopt(record.id)
        return _observation({"task": task, "env": self.env.id, "scenario": record.scenario,
                             "seed": record.seed})

    async def _adopt(self, session_id: str) -> None:
        """Hold the new session (bound to the handle, if any: in place of an ended one)."""
        replace = self.session_id is not None
        if self.handle is not None and not await self.bindings.bind(self.handle, session_id,
                                                                    replace=replace):
            await self.service.delete(self.caller, session_id)
            raise WsError(f"session {self.handle!r} was reset by another connection at the same "
                          "time; reset again", "SESSION_ERROR")
        self.session_id = session_id
        log.info("openenv session opened handle=%s session=%s env=%s", self.handle or "-",
                 session_id, self.env.id)

    async def step(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("type") == "list_tools":
            _model(ListToolsAction, data, "data")
            return _observation({"tools": tools_with_submit(self.env, "inputSchema")})
        action = _model(CallToolAction, data, "data")
        if self.session_id is None:
            raise WsError("no episode yet: send reset (with its scenario) first", "SESSION_ERROR")
        outcome = await call(self.service, self.caller, self.session_id, action.tool_name,
                             action.arguments)
        error = None if outcome.error is None else {
            "error_type": TOOL_ERROR_TYPES.get(outcome.error["type"], "transport_error"),
            "message": f"{outcome.error['type']}: {outcome.error['message']}"}
        return _observation({"tool_name": action.tool_name, "result": outcome.result,
                             "error": error}, outcome.done, outcome.reward)

    async def state(self) -> dict[str, Any]:
        if self.session_id is None:
            return {"type": "state", "data": {"episode_id": None, "step_count": 0}}
        record = await self.service.info(self.caller, self.session_id)
        return {"type": "state", "data": {"episode_id": record.id, "step_count": record.step,
                                          "env": record.env, "scenario": record.scenario,
                                          "epoch": record.epoch, "status": record.status}}

    async def close(self) -> None:
        """A session of its own ends with its WebSocket; a bound one stays for ``/mcp``."""
        if self.handle is None and self.session_id is not None:
            await self.service.delete(self.caller, self.session_id)


@router.websocket("/ws")
async def ws(websocket: WebSocket, env_id: str) -> None:
    await websocket.accept()
    app = websocket.app
    try:
        caller = admin_caller(app.state.auth, websocket.headers.get("authorization"))
        env = app.state.catalogue.env(env_id)
        handle = websocket.query_params.get("session_id")
        bindings = _bindings(app)
        if handle is not None:
            bindings.check(handle)
    except ApiError as exc:
        await websocket.send_text(jsoncodec.dumps(WsError.of(exc).frame))
        await websocket.close(code=1008)
        return
    connection = Connection(app.state.service, bindings, caller, env, handle)
    try:
        await _serve(websocket, connection)
    except WebSocketDisconnect:
        pass
    finally:
        try:
            await connection.close()
        except ApiError as exc:
            log.warning("openenv session close failed session=%s error=%s",
                        connection.session_id, exc)


async def _serve(websocket: WebSocket, connection: Connection) -> None:
    settings = websocket.app.state.settings
    while True:
        text = await _receive(websocket)
        try:
            if len(text.encode()) > settings.max_request_bytes:
                raise WsError(f"the message exceeds {settings.max_request_bytes} bytes "
                              "(ENVSCALER_MAX_REQUEST_BYTES)", "VALIDATION_ERROR")
            message = _message(text, settings.json_limits())
            if message.type == "close":
                return
            frame = await _answer(connection, message)
        except WsError as exc:
            frame = exc.frame
        except ApiError as exc:
            frame = WsError.of(exc).frame
        await websocket.send_text(jsoncodec.dumps(frame))


async def _receive(websocket: WebSocket) -> str:
    """The next message's text; a binary frame is taken as UTF-8 text (then JSON as any)."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    text = message.get("text")
    return text if text is not None else (message.get("bytes") or b"").decode("utf-8", "replace")


def _message(text: str, limits: jsonlimits.JsonLimits) -> Message:
    try:
        value = jsonlimits.loads(text, limits, "message")
    except ValueError as exc:
        raise WsError(f"Invalid JSON: {exc}", "INVALID_JSON") from None
    except ApiError as exc:
        raise WsError.of(exc) from None
    return _model(Message, value, "message")


async def _answer(connection: Connection, message: Message) -> dict[str, Any]:
    if message.type == "reset":
        return await connection.reset(message.data)
    if message.type == "step":
        return await connection.step(message.data)
    if message.type == "state":
        return await connection.state()
    raise WsError(f"Unknown message type: {message.type}", "UNKNOWN_TYPE")


DOOR = Door(name="openenv", router=router)
